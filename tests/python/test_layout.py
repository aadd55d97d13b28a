"""The struct layouts the binding declares (python/src/cortiq/_ffi.py, cffi ABI mode) are the C
compiler's: a probe compiled against include/cortiq/*.h prints sizeof and every offsetof, and
each must equal cffi's. A header that moves a field fails here instead of corrupting memory."""
import os
import shutil
import subprocess

import pytest

from conftest import ROOT
from cortiq._ffi import ffi

# struct -> fields the binding reads or writes; a struct declared whole must match in size too
WHOLE = {
    "cmf_err": ["code", "msg"],
    "cmf_tensor": ["name", "name_len", "dtype", "ndim", "shape", "off", "nbytes", "hash", "shard",
                   "data"],
    "cmf_mask": ["task_id", "name", "description", "sparsity", "has_sparsity", "quality_json",
                 "parent", "priority", "has_hot_pack", "blob_off", "blob_len",
                 "has_expert_fields", "ffn", "heads", "gates", "experts"],
    "cmf_masks": ["default_task", "n_layers", "intermediate", "n_heads", "n_experts", "ffn_bytes",
                  "head_bytes", "gates_bytes", "expert_bytes", "n_masks", "masks"],
    "cmf_verify_stats": ["tensors_checked", "tensors_bad", "bytes_hashed", "problems", "seconds"],
    "cmf_quant_opts": ["vbit_mean_bits", "row_weights", "outlier_frac"],
    "cmf_writer_opts": ["shard_max_bytes", "progress", "progress_user"],
    "cmf_convert_progress": ["tensors_done", "tensors_total", "source_bytes_done",
                             "source_bytes_total", "seconds", "final"],
    "cmf_convert_opts": ["quant", "embed_quant", "head_quant", "has_embed_quant",
                         "has_head_quant", "allow_q1", "vbit_mean_bits", "shard_max_bytes",
                         "threads", "on_progress", "on_fallback", "progress_user", "defrag_dir"],
    "cmf_convert_stats": ["tensors", "fallbacks", "source_bytes", "output_bytes", "seconds"],
    "cortiq_sampler_params": ["temperature", "top_k", "top_p", "min_p", "repeat_penalty",
                              "repeat_last_n", "seed"],
    "cortiq_runtime_opts": ["threads", "ctx", "kv", "act", "no_huge_pages", "verify_tensors",
                            "skill", "blend", "n_blend", "batch_lanes"],
    "cortiq_skill_weight": ["id", "weight"],
    "cortiq_generate_params": ["sampler", "max_tokens"],
    "cortiq_generate_stats": ["prompt_tokens", "cached_tokens", "generated_tokens",
                              "prefill_seconds", "decode_seconds", "finish"],
}
# the binding's cmf_header_head mirrors the first fields of cmf_header
PREFIX = {"cmf_header": ("cmf_header_head", ["json", "json_len"])}
ENUMS = ["cmf_status", "cmf_dtype", "cortiq_kv_type", "cortiq_act_mode", "cortiq_finish"]


def probe_source():
    lines = ["#include <stddef.h>", "#include <stdio.h>"]
    lines += [f'#include "cortiq/{h}"' for h in ("format.h", "quant.h", "writer.h",
                                                  "converter.h", "engine.h", "runtime.h")]
    lines.append("int main(void) {")
    for s, fields in WHOLE.items():
        lines.append(f'printf("{s} %zu\\n", sizeof({s}));')
        lines += [f'printf("{s}.{f} %zu\\n", offsetof({s}, {f}));' for f in fields]
    for s, (_, fields) in PREFIX.items():
        lines += [f'printf("{s}.{f} %zu\\n", offsetof({s}, {f}));' for f in fields]
    lines += [f'printf("{e} %zu\\n", sizeof({e}));' for e in ENUMS]
    lines += ["return 0;", "}"]
    return "\n".join(lines)


def test_layouts_match_the_headers(tmp_path):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the layout probe")
    src = tmp_path / "probe.c"
    src.write_text(probe_source())
    exe = tmp_path / "probe"
    r = subprocess.run([cc, "-std=c17", "-I", str(ROOT / "include"), str(src), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    c = dict(line.rsplit(" ", 1) for line in subprocess.check_output([str(exe)], text=True)
             .splitlines())
    ours = {}
    for s, fields in WHOLE.items():
        ours[s] = ffi.sizeof(s)
        ours.update({f"{s}.{f}": ffi.offsetof(s, f) for f in fields})
    for s, (mirror, fields) in PREFIX.items():
        ours.update({f"{s}.{f}": ffi.offsetof(mirror, f) for f in fields})
    ours.update({e: ffi.sizeof(e) for e in ENUMS})
    wrong = {k: (v, int(c[k])) for k, v in ours.items() if int(c[k]) != v}
    assert not wrong, f"binding vs C (bytes): {wrong}"
