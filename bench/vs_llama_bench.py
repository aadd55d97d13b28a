#!/usr/bin/env python3
"""vs_llama_bench - cortiq against llama.cpp's own `llama-bench` (native C++, no Python in the
timed loop), in alternating rounds on the same machine.

usage: bench/vs_llama_bench.py --llama-bench BIN [--cortiq build/src/cortiq] [-p 128] [-n 64]
           [-r 3] [-t 2] [--rounds 5] [--omp-passive] [--cortiq-env K=V ...]
           LABEL:MODEL.gguf:MODEL.cmf [...]

Each round runs `llama-bench -m MODEL.gguf -p P -n N -r R -t T` and `cortiq bench MODEL.cmf -p P
-n N -r R -t T --json` one after the other (the order alternates per round), and takes each
side's mean tok/s of that run. The table gives per pair the median over the rounds of prefill
and decode tok/s of both and the median of the per-round ratios (a ratio is taken within one
round, so both sides saw the same machine state). A shared or virtual machine drifts by tens
of percent within minutes: more rounds, not longer runs, is the remedy.

--omp-passive runs llama.cpp with OMP_WAIT_POLICY=passive (its threads sleep between graph
nodes instead of spinning: its better setting when other processes share the cores).
bench/vs_llamacpp drives llama.cpp through llama-cpp-python instead, whose per-token Python
overhead dominates on small fast models; this script is the one to use for them.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def llama_run(a, gguf):
    env = dict(os.environ)
    env.setdefault("LD_LIBRARY_PATH", os.path.dirname(os.path.abspath(a.llama_bench)))
    if a.omp_passive:
        env["OMP_WAIT_POLICY"] = "passive"
    out = subprocess.run([a.llama_bench, "-m", gguf, "-p", str(a.p), "-n", str(a.n), "-r", str(a.r),
                          "-t", str(a.t), "-o", "json"], capture_output=True, text=True, env=env,
                         check=True).stdout
    pp = tg = None
    for row in json.loads(out):
        if row.get("n_prompt") == a.p and row.get("n_gen") == 0:
            pp = row["avg_ts"]
        if row.get("n_gen") == a.n and row.get("n_prompt") == 0:
            tg = row["avg_ts"]
    return pp, tg


def cortiq_run(a, cmf):
    env = dict(os.environ)
    for kv in a.cortiq_env:
        k, v = kv.split("=", 1)
        env[k] = v
    out = subprocess.run([a.cortiq, "bench", cmf, "-p", str(a.p), "-n", str(a.n), "-r", str(a.r),
                          "-t", str(a.t), "--json"], capture_output=True, text=True, env=env,
                         check=True).stdout
    d = json.loads(out[out.index("{"):])
    return d["prefill_tok_s"], d["decode_tok_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", help="LABEL:MODEL.gguf:MODEL.cmf")
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--cortiq", default="build/src/cortiq")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--omp-passive", action="store_true")
    ap.add_argument("--cortiq-env", action="append", default=[], help="K=V for cortiq's runs (e.g. CORTIQ_CPU=avx2)")
    a = ap.parse_args()
    print(f"threads {a.t}, prompt {a.p}, decode {a.n}, reps {a.r}, {a.rounds} alternating rounds"
          f"{', llama.cpp OMP_WAIT_POLICY=passive' if a.omp_passive else ''}"
          f"{', cortiq ' + ' '.join(a.cortiq_env) if a.cortiq_env else ''}; load average at start "
          f"{' '.join('%.2f' % x for x in os.getloadavg())}")
    print()
    print("| pair | prefill cortiq | prefill llama.cpp | ratio (min–max) | decode cortiq | decode llama.cpp | ratio (min–max) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for pair in a.pairs:
        label, gguf, cmf = pair.split(":")
        rows = []
        for k in range(a.rounds):
            if k % 2 == 0:
                l, c = llama_run(a, gguf), cortiq_run(a, cmf)
            else:
                c, l = cortiq_run(a, cmf), llama_run(a, gguf)
            rows.append((c[0], l[0], c[1], l[1]))
            print(f"  {label} round {k + 1}: prefill {c[0]:.1f} / {l[0]:.1f}, decode {c[1]:.1f} / {l[1]:.1f}",
                  file=sys.stderr)
        med = [statistics.median(r[i] for r in rows) for i in range(4)]
        rp = [r[0] / r[1] for r in rows]
        rd = [r[2] / r[3] for r in rows]
        print(f"| {label} | {med[0]:.1f} | {med[1]:.1f} | {statistics.median(rp):.2f} ({min(rp):.2f}–{max(rp):.2f}) "
              f"| {med[2]:.1f} | {med[3]:.1f} | {statistics.median(rd):.2f} ({min(rd):.2f}–{max(rd):.2f}) |")
    print(f"\nload average at end {' '.join('%.2f' % x for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
