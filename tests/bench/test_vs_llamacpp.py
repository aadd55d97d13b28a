#!/usr/bin/env python3
"""The benchmark harness's own arithmetic (bench/vs_llamacpp): a row from alternating rounds
(medians, ratios as the median of the rounds' ratios with their range, the roofline against the
higher probe of each round, the products' GFLOP/s), from one round (the run's own sd), the bits-per-weight label, and
the bits per weight of real files converted by cortiq (every f16 tensor: exactly 16), a
prefill-only run's line (no decode figures), and what llama-bench is asked for (its decode after
a context as long as the prompt, the positions cortiq's decode has), and the CPU other processes
took during a measured run (the rows it flags).

usage: test_vs_llamacpp.py CORTIQ_BIN SOURCE_DIR        (stdlib only; no llama.cpp needed)
"""
import os
import resource
import statistics
import subprocess
import sys
import tempfile

from bench_script import Checks, load

cortiq, root = sys.argv[1], sys.argv[2]
vs = load(root, "vs_llamacpp")
check = Checks()


def near(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def a_round(cp, cd, lp, ld, bw, sd=0.0):
    c = {"prefill_tok_s": cp, "prefill_tok_s_sd": sd, "decode_tok_s": cd, "decode_tok_s_sd": sd,
         "weight_bytes_per_token": 1e9}
    return {"c": c, "c_rss": 100.0 + cp / 1000, "bw": bw, "l": {"prefill": lp, "decode": ld},
            "l_rss": 200.0}


# three rounds: the medians and ratios are the rounds', not the pooled runs'
rounds = [a_round(300, 30, [100, 100], [20, 20], (30.0, 40.0)),
          a_round(200, 40, [150, 150], [25, 25], (35.0, 33.0)),
          a_round(210, 20, [200, 200], [10, 10], (50.0, 20.0))]
r = vs.row_of("m", "Q4_0 ↔ q4t", "x.cmf", "x.gguf", rounds)
check("prefill median (not the mean)", near(r["cortiq_prefill"], 210) and near(r["llama_prefill"], 150))
check("decode median", near(r["cortiq_decode"], 30) and near(r["llama_decode"], 20))
pr = [3.0, 200 / 150, 210 / 200]
check("prefill ratio: the median of the rounds'", near(r["prefill_ratio"], statistics.median(pr)))
check("prefill ratio range", near(r["prefill_ratio_range"][0], min(pr)) and near(r["prefill_ratio_range"][1], 3.0))
check("decode ratio median and range", near(r["decode_ratio"], 1.6) and r["decode_ratio_range"] == (1.5, 2.0))
check("sd over the rounds", near(r["cortiq_prefill_sd"], statistics.stdev([300, 200, 210])))
# each round's roofline is its higher probe: 30 / 40, 40 / 35, 20 / 50 tok/s of 1 GB
check("roofline median", near(r["cortiq_decode_pct_roofline"], 100 * statistics.median([30 / 40, 40 / 35, 20 / 50])))
check("probe range", r["read_bw_before_gbs"] == 20.0 and r["read_bw_after_gbs"] == 50.0)
check("peak RSS: the largest", near(r["cortiq_rss_mb"], 100.3) and r["rounds"] == 3)
check("ratio cell with range", vs.ratio_cell(r, "decode_ratio") == "1.60 (1.50–2.00)")
check("no token_macs (an older cortiq): no GFLOP/s", r["token_macs"] is None and r["cortiq_prefill_gflops"] is None)

# the products' GFLOP/s: 2 x multiply-adds per token x the median tok/s of each side
for x in rounds:
    x["c"]["token_macs"] = 5e8
g = vs.row_of("m", "Q4_0 ↔ q4t", "x.cmf", "x.gguf", rounds)
check("GFLOP/s of the medians", near(g["cortiq_prefill_gflops"], 2 * 0.5 * 210) and near(g["llama_prefill_gflops"], 2 * 0.5 * 150))

# one round: as measured, with the run's own sd and probes
one = vs.row_of("m", "l", "x.cmf", "x.gguf", [a_round(300, 30, [100, 110], [20, 22], (30.0, 40.0), sd=7.0)])
check("one round: its values", near(one["cortiq_prefill"], 300) and near(one["llama_prefill"], 105))
check("one round: the run's sd", near(one["cortiq_prefill_sd"], 7.0) and near(one["llama_prefill_sd"], statistics.stdev([100, 110])))
check("one round: its probes", one["read_bw_before_gbs"] == 30.0 and one["read_bw_after_gbs"] == 40.0)
check("one round: no range", vs.ratio_cell(one, "prefill_ratio") == f"{300 / 105:.2f}")

# a prefill-only run (-n 0): no decode on either side, so no decode figures in the line
pre = vs.row_of("m", "l", "x.cmf", "x.gguf", [a_round(300, 0.0, [100], [0.0], (30.0, 40.0)),
                                              a_round(310, 0.0, [110], [0.0], (31.0, 41.0))])
line = vs.table_row(pre)
check(f"prefill only: no decode figures ({line})", "nan" not in line
      and "| 2.91 (2.82–3.00) | – | – | – | – (30.0 / 41.0 GB/s) |" in line)
check("a decoded row keeps its figures", "1.60 (1.50–2.00)" in vs.table_row(r) and "nan" not in vs.table_row(r))

# llama-bench: the prefill on its own, the decode after a P-token context (-d P), the larger RSS
calls = []


def fake_rows(a, gguf, args):
    calls.append(args)
    depth = int(args[args.index("-d") + 1]) if "-d" in args else 0
    p, n = int(args[args.index("-p") + 1]), int(args[args.index("-n") + 1])
    rows = []
    if p:
        rows.append({"n_prompt": p, "n_gen": 0, "n_depth": depth, "samples_ts": [500.0, 510.0]})
    if n:  # a depth-0 decode row that must not be taken for the decode after the context
        rows.append({"n_prompt": 0, "n_gen": n, "n_depth": 0, "samples_ts": [99.0]})
        rows.append({"n_prompt": 0, "n_gen": n, "n_depth": depth, "samples_ts": [80.0, 82.0]})
    return rows, 300.0 + len(calls), 0.0


class A:
    p, n, r = 256, 64, 3


vs.llama_bench_rows = fake_rows
got, rss = vs.llama_bench_warm(A(), "x.gguf")
check(f"llama-bench: prefill, then decode after -d 256 ({calls})",
      calls == [["-p", "256", "-n", "0", "-r", "3"], ["-p", "0", "-n", "64", "-d", "256", "-r", "3"]])
check("llama-bench: the rows read", got["prefill"] == [500.0, 510.0] and got["decode"] == [80.0, 82.0])
check("llama-bench: the larger peak RSS", rss == 302.0)
calls.clear()
A.n = 0
got, rss = vs.llama_bench_warm(A(), "x.gguf")
check("llama-bench -n 0: one run, decode 0", calls == [["-p", "256", "-n", "0", "-r", "3"]] and got["decode"] == [0.0])

# other processes' CPU during a run: the machine's busy time less the child's own, per wall second
check("others: 2 s busy, 1.5 of them the child's, over 2 s", near(vs.others_cores(10.0, 12.0, 1.5, 2.0), 0.25))
check("others: never below 0 (the clock ticks of /proc/stat)", vs.others_cores(10.0, 10.0, 0.3, 1.0) == 0.0)
check("others: no /proc/stat", vs.others_cores(None, None, 1.0, 1.0) == 0.0)
# run_child subtracts its child's CPU: with the machine's busy time read as the children's own,
# a child that spins 1.2 s leaves nothing to the others (not subtracted: ~1 core)
def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


real_busy, vs.cpu_busy_s = vs.cpu_busy_s, children_cpu_s
n_before = len(vs.OTHERS)
vs.run_child([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2: pass"])
vs.cpu_busy_s = real_busy
check(f"run_child: one entry, the child's own CPU not counted ({vs.OTHERS[n_before:]})",
      len(vs.OTHERS) == n_before + 1 and vs.OTHERS[-1][0] < 0.1 and vs.OTHERS[-1][1] >= 1.2)
vs.OTHERS += [(0.5, 2.0), (3.0, 0.02), (0.4, 1.5)]
check("others_since: the most of the runs since the mark, the short ones left out",
      near(vs.others_since(n_before + 1), 0.5) and vs.others_since(len(vs.OTHERS)) == 0.0)
note = vs.busy_note([{"model": "M", "label": "a", "others_cores": 0.2},
                     {"model": "M", "label": "b", "others_cores": 0.3}],
                    [{"model": "M", "label": "c", "kv": "f16", "depth": 4096, "others_cores": 1.1}])
check(f"busy note: the rows above {vs.BUSY_CORES} only ({note})",
      "M b: 0.30" in note and "M c (KV f16, context 4096): 1.10" in note and "M a" not in note)
check("busy note: none", vs.busy_note([{"model": "M", "label": "a", "others_cores": 0.1}], []) == "")

deep = {"model": "M", "label": "c", "kv": "q8", "depth": 4096, "cortiq_decode": 70.0, "cortiq_decode_sd": 1.5,
        "llama_decode": 25.0, "llama_decode_sd": 0.0, "decode_ratio": 2.8}
check(f"long-context row: ± only where runs differed ({vs.depth_row(deep)})",
      vs.depth_row(deep) == "| M | c | q8 | 4096 | 70.0 ± 1.5 | 25.0 | 2.80 |")
check("long-context head matches its rows", vs.DEPTH_HEAD[0].count("|") == vs.depth_row(deep).count("|"))
check("matrix head matches its rows", vs.TABLE_HEAD[0].count("|") == vs.TABLE_HEAD[1].count("|")
      == vs.table_row(r).count("|"))

check("bits label", vs.with_bits("Q4_0 ↔ vbit", 4.507, 4.5033) == "Q4_0 (4.51) ↔ vbit (4.50)")
check("bits label without a side", vs.with_bits("Q4_0 ↔ vbit", None, 4.5) == "Q4_0 ↔ vbit")

# bits per weight of converted files, through `cortiq tensors`
with tempfile.TemporaryDirectory() as tmp:
    bits = {}
    for q in ("f16", "q8"):
        out = os.path.join(tmp, f"{q}.cmf")
        subprocess.run([cortiq, "convert", "--model", os.path.join(root, "tests", "fixtures", "tiny", "qwen2"),
                        "--quant", q, "--output", out, "-q"], check=True)
        bits[q] = vs.cmf_bits(cortiq, out)
    check(f"f16 file: 16 bits per weight (got {bits['f16']})", bits["f16"] is not None and near(bits["f16"], 16.0))
    check(f"q8 file: between 8 and 16 bits per weight (got {bits['q8']})",
          bits["q8"] is not None and 8.0 < bits["q8"] < 16.0)

check.finish("test_vs_llamacpp")
