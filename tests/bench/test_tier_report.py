#!/usr/bin/env python3
"""bench/tier_report's choices and arithmetic: the tiers and llama.cpp builds it plans for the
CPUs the tables come from (an AVX2-only Zen 3, a Zen 4, a Xeon with AMX and AVX-VNNI, an AVX2
client core with AVX-VNNI, a CPU without AVX2), the "At a glance" summary of a tier's rows, the
report rendered from a run directory's JSON, and the command line's plan and refusals, all
without building or measuring anything.

usage: test_tier_report.py CORTIQ_BIN SOURCE_DIR        (stdlib only)
"""
import json
import os
import subprocess
import sys
import tempfile

from bench_script import Checks, load

cortiq, root = sys.argv[1], sys.argv[2]
script = os.path.join(root, "bench", "tier_report")
tr = load(root, "tier_report")
check = Checks()


def cpuinfo(vendor, flags):
    one = f"processor\t: 0\nvendor_id\t: {vendor}\nmodel name\t: test cpu\nflags\t\t: {flags}\n\n"
    return one + one.replace("processor\t: 0", "processor\t: 1").replace(flags, "sse2")


BASE = "fpu sse2 avx avx2 fma f16c bmi2"
ZEN3 = cpuinfo("AuthenticAMD", BASE)
ZEN4 = cpuinfo("AuthenticAMD", BASE + " avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512vbmi")
XEON = cpuinfo("GenuineIntel", BASE + " avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx_vnni "
               "amx_tile amx_int8 amx_bf16")
CLIENT = cpuinfo("GenuineIntel", BASE + " avx_vnni")

# flags and vendor from the first processor only
flags, vendor = tr.cpu_flags(ZEN4)
check(f"vendor {vendor}", vendor == "AuthenticAMD")
check("first processor's flags", "avx512_bf16" in flags and "sse2" in flags)
check("no flags from the second processor", tr.cpu_flags(ZEN3)[0] == set(BASE.split()))


def tiers(text):
    return [(t, b) for t, b, _ in tr.plan(tr.cpu_flags(text)[0])]


check(f"Zen 3 {tiers(ZEN3)}", tiers(ZEN3) == [("native", "native")])
check(f"Zen 4 {tiers(ZEN4)}", tiers(ZEN4) == [("native", "native"), ("avx2", "avx2")])
check(f"Xeon {tiers(XEON)}", tiers(XEON) == [("native", "native-avx512"), ("avx512", "native-avx512"),
                                              ("avx2-vnni", "avx2-vnni"), ("avx2", "avx2")])
check(f"AVX2 client core {tiers(CLIENT)}", tiers(CLIENT) == [("native", "native")])
plans = {t: f for t, _, f in tr.plan(tr.cpu_flags(XEON)[0])}
check("AMX: llama.cpp without its native build", "-DGGML_NATIVE=OFF" in plans["native"]
      and "-DGGML_AVX512=ON" in plans["native"] and "-DGGML_AVX512_BF16=ON" in plans["native"])
check("AMX: VBMI only where the CPU has it", "-DGGML_AVX512_VBMI=ON" not in plans["native"])
check("forced AVX2: no AVX-512, no AVX-VNNI", "-DGGML_AVX512=OFF" in plans["avx2"]
      and not any("VNNI" in f for f in plans["avx2"]))
check("AVX2 + AVX-VNNI", "-DGGML_AVX_VNNI=ON" in plans["avx2-vnni"])
check("Zen 4 native", tr.plan(tr.cpu_flags(ZEN4)[0])[0][2] == ["-DGGML_NATIVE=ON"])
try:
    tr.plan(tr.cpu_flags(cpuinfo("GenuineIntel", "fpu sse2 avx"))[0])
    check("a CPU without AVX2 refused", False)
except ValueError:
    pass


def row(model, pre, dec, pct, cd=10.0, ld=5.0):
    return {"model": model, "label": "Q4_0 ↔ q4_tiled", "rounds": 3, "cortiq_prefill": 100.0,
            "cortiq_prefill_sd": 1.0, "llama_prefill": 100.0 / pre, "llama_prefill_sd": 1.0,
            "prefill_ratio": pre, "prefill_ratio_range": (pre - 0.1, pre + 0.1), "cortiq_decode": cd,
            "cortiq_decode_sd": 0.5, "llama_decode": ld, "llama_decode_sd": 0.5, "decode_ratio": dec,
            "decode_ratio_range": (dec - 0.1, dec + 0.1), "cortiq_decode_pct_roofline": pct,
            "read_bw_before_gbs": 30.0, "read_bw_after_gbs": 31.0, "cortiq_rss_mb": 90.0,
            "llama_rss_mb": 190.0, "token_macs": 1e8, "cortiq_prefill_gflops": 20.0,
            "llama_prefill_gflops": 10.0}


rows = [row("a", 2.0, 1.49, 80.0), row("b", 1.5, 3.0, 120.0), row("c", 1.2, 1.6, 95.0)]
s = tr.summarize(rows)
check(f"summary {s}", s == {"rows": 3, "prefill": (1.2, 2.0, 2), "decode": (1.49, 3.0, 2),
                            "decode_pct": (80.0, 120.0)})
line = tr.glance_line("avx2", s)
check(f"glance line {line}", line == "| avx2 | 1.20–2.00× (2 of 3) | 1.49–3.00× (2 of 3) | 80–120 % |")
prefill_only = tr.summarize([row("a", 1.7, float("nan"), 0.0, cd=0.0, ld=0.0)])
check(f"prefill-only rows {prefill_only}", prefill_only == {"rows": 1, "prefill": (1.7, 1.7, 1)})
check("prefill-only line", tr.glance_line("amx", prefill_only) == "| amx | 1.70–1.70× (1 of 1) | – | – |")
check("no rows", tr.summarize([]) is None)
# the ratios bold where they meet 1.5x, as the docs' tables have them; a decode-less row's dash kept
check("bold", tr.bold_ratios("| m | p | 1 ± 0 | 1 ± 0 | 1.50 (1.4–1.6) | 2 ± 0 | 2 ± 0 | 1.49 | x |")
      == "| m | p | 1 ± 0 | 1 ± 0 | **1.50** (1.4–1.6) | 2 ± 0 | 2 ± 0 | 1.49 | x |")
check("bold: no decode", tr.bold_ratios("| m | p | 1 | 1 | 2.00 | – | – | – | x |")
      == "| m | p | 1 | 1 | **2.00** | – | – | – | x |")

# the report from a run directory: the summary line, the table (vs_llamacpp's rows), a
# long-context table and the note on rows measured beside other work
with tempfile.TemporaryDirectory() as d:
    json.dump({"cpu": "test cpu", "commit": "abc1234", "started": "now", "llama": "a tree",
               "tiers": [["native", "native", ["-DGGML_NATIVE=ON"]], ["avx2", "avx2", ["-DGGML_AVX2=ON"]]]},
              open(os.path.join(d, "plan.json"), "w"))
    busy = dict(row("b", 1.5, 3.0, 120.0), others_cores=0.9)
    run = {"read_bw_gbs": 31.0, "loadavg": [0.5, 0.4, 0.3], "loadavg_end": [0.6, 0.5, 0.4], "rounds": 3}
    json.dump(dict(run, rows=[rows[0], busy]), open(os.path.join(d, "native-matrix.json"), "w"))
    deep = {"model": "q", "label": "Q4_0 ↔ q4_tiled", "kv": "f16", "depth": 4096, "cortiq_decode": 70.0,
            "llama_decode": 25.0, "decode_ratio": 2.8}
    json.dump(dict(run, rows=[], depth_rows=[deep], rounds=1), open(os.path.join(d, "native-long.json"), "w"))
    text = tr.render(d)
    check("report written", os.path.isfile(os.path.join(d, "report.md")))
    check("glance row", "| native | 1.50–2.00× (2 of 2) | 1.49–3.00× (1 of 2) | 80–120 % |" in text)
    check("no avx2 row without its JSON", "| avx2 |" not in text)
    check("matrix table", text.count("| a | Q4_0 ↔ q4_tiled |") == 1 and "## native: matrix" in text)
    check("matrix rows bold", "| **2.00** (1.90–2.10) |" in text and "| 1.49 (1.39–1.59) |" in text)
    check("long-context table", "| q | Q4_0 ↔ q4_tiled | f16 | 4096 | 70.0 | 25.0 | 2.80 |" in text)
    check("busy row named", "b Q4_0 ↔ q4_tiled: 0.90" in text)

# a llama.cpp build is reused while its source and flags are the same, rebuilt otherwise (here
# from a source tree that is not there, so the rebuild's cmake fails)
with tempfile.TemporaryDirectory() as d:
    class A:
        llama_dir, llama_src, llama_version = d, os.path.join(d, "no-such-tree"), "0.3.36"
    bdir = os.path.join(d, "build-avx2")
    os.makedirs(os.path.join(bdir, "bin"))
    for b in ("llama-bench", "llama-quantize"):
        path = os.path.join(bdir, "bin", b)
        open(path, "w").close()
        os.chmod(path, 0o755)
    with open(os.path.join(bdir, "tier_report.flags"), "w") as f:
        f.write(" ".join([A.llama_src] + tr.COMMON + tr.BUILDS["avx2"]))
    log = os.path.join(d, "log")
    bins = tr.llama_build(A, "avx2", tr.BUILDS["avx2"], log)
    check("same source and flags: reused", bins[0] == os.path.join(bdir, "bin", "llama-bench")
          and not os.path.exists(log))
    try:
        tr.llama_build(A, "avx2", tr.BUILDS["avx2-vnni"], log)
        check("other flags: rebuilt", False)
    except RuntimeError:
        check("other flags: rebuilt (cmake ran)", "cmake" in open(log).read())

# the command line: the plan for a given CPU without running anything, and its refusals
with tempfile.NamedTemporaryFile("w", suffix=".cpuinfo", delete=False) as f:
    f.write(XEON)
try:
    out = subprocess.run([sys.executable, script, "--cpuinfo", f.name, "--dry-run", "--7b", "--long"],
                         capture_output=True, text=True)
    check(f"dry run rc {out.returncode}: {out.stderr}", out.returncode == 0)
    check("dry run names the tiers", "tiers: native, avx512, avx2-vnni, avx2" in out.stdout)
    check("each build once", out.stdout.count("llama.cpp build-native-avx512:") == 1)
    check("7B on the native and forced AVX2 tiers only",
          "native 7b:" in out.stdout and "avx2 7b:" in out.stdout and "avx512 7b:" not in out.stdout)
    check("long context on the native and forced AVX2 tiers only",
          "native long:" in out.stdout and "avx2 long:" in out.stdout and out.stdout.count(" long:") == 2)
    check("the matrix on every tier", out.stdout.count(" matrix:") == 4)
    out = subprocess.run([sys.executable, script, "--cpuinfo", f.name, "--dry-run", "--tiers", "avx512,avx2",
                          "--long", "--no-matrix"], capture_output=True, text=True)
    check(f"--no-matrix: the long-context rows alone (rc {out.returncode})", out.returncode == 0
          and out.stdout.count(" long:") == 1 and "avx2 long:" in out.stdout and " matrix:" not in out.stdout)
    check("--no-matrix: only the builds its rows use",
          "build-avx2:" in out.stdout and "build-native-avx512" not in out.stdout)
    out = subprocess.run([sys.executable, script, "--cpuinfo", f.name, "--dry-run", "--tiers", "avx512",
                          "--7b", "--no-matrix"], capture_output=True, text=True)
    check(f"--no-matrix with nothing to run refused (rc {out.returncode})",
          out.returncode == 2 and "nothing to run" in out.stderr)
    out = subprocess.run([sys.executable, script, "--cpuinfo", f.name, "--dry-run", "--tiers", "avx2,zen"],
                         capture_output=True, text=True)
    check(f"unknown tier refused (rc {out.returncode})", out.returncode == 2 and "zen" in out.stderr)
    out = subprocess.run([sys.executable, script, "--cpuinfo", f.name, "--dry-run", "--tiers", "avx2"],
                         capture_output=True, text=True)
    check("one tier picked", "tiers: avx2" in out.stdout and "build-native" not in out.stdout)
    out = subprocess.run([sys.executable, script, "--cpuinfo", f.name, "--cortiq", "/nonexistent/cortiq",
                          "--out", tempfile.mkdtemp()], capture_output=True, text=True)
    check(f"missing cortiq refused (rc {out.returncode})", out.returncode == 2 and "no cortiq" in out.stderr)
finally:
    os.unlink(f.name)

check.finish("test_tier_report")
