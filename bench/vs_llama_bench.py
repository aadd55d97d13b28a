#!/usr/bin/env python3
"""vs_llama_bench - cortiq against llama.cpp's own `llama-bench` (native C++, no Python in the
timed loop), in alternating rounds on the same machine, for pairs given by hand.

usage: bench/vs_llama_bench.py --llama-bench BIN [--cortiq build/src/cortiq] [-p 128[,P2...]]
           [-n 64] [-r 3] [-t 2] [--rounds 5] [--omp-passive] [--cortiq-env K=V ...]
           LABEL:MODEL.gguf:MODEL.cmf [...]

Each round runs `llama-bench -m MODEL.gguf -p P -n 0 -r R -t T`, then `-p 0 -n N -d P` (its decode
after a P-token context, the positions cortiq's decode after its prompt has), and `cortiq bench
MODEL.cmf -p P -n N -r R -t T --json` one after the other (the order alternates per round), each
side's mean tok/s of that run. The table gives per pair the median over the rounds of prefill and
decode tok/s of both and the median of the per-round ratios with their range (a ratio is taken
within one round, so both sides saw the same machine state). A shared or virtual machine drifts by
tens of percent within minutes: more rounds, not longer runs, is the remedy. Several prompt lengths
(-p 4,8,12) give a row per pair and length; -n 0 times prefill alone (short prompts: the decode
columns read "–").

The rounds are bench/vs_llamacpp's (`--rounds`, its one_round and row_of), which also gives
peak RSS, the bandwidth roofline and bits per weight; this is its short form.
--omp-passive runs llama.cpp with OMP_WAIT_POLICY=passive (its threads sleep between graph
nodes instead of spinning: its better setting when other processes share the cores).
"""
import argparse
import os
import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader

HERE = os.path.dirname(os.path.abspath(__file__))
_loader = SourceFileLoader("vs_llamacpp", os.path.join(HERE, "vs_llamacpp"))
vs = module_from_spec(spec_from_loader("vs_llamacpp", _loader))
_loader.exec_module(vs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", help="LABEL:MODEL.gguf:MODEL.cmf")
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--cortiq", default="build/src/cortiq")
    ap.add_argument("-p", default="128", help="prompt length, or a comma list of them")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--omp-passive", action="store_true")
    ap.add_argument("--cortiq-env", action="append", default=[], help="K=V for cortiq's runs (e.g. CORTIQ_CPU=avx2)")
    a = ap.parse_args()
    # the settings vs_llamacpp's measuring functions read
    a.cortiq, a.tier, a.cortiq_args, a.llama_omp_passive = os.path.abspath(a.cortiq), "native", "", a.omp_passive
    prompts = [int(p) for p in a.p.split(",") if p]
    print(f"threads {a.t}, prompt {a.p}, decode {a.n}, reps {a.r}, {a.rounds} alternating rounds"
          f"{', llama.cpp OMP_WAIT_POLICY=passive' if a.omp_passive else ''}"
          f"{', cortiq ' + ' '.join(a.cortiq_env) if a.cortiq_env else ''}; load average at start "
          f"{' '.join('%.2f' % x for x in os.getloadavg())}")
    print()
    print("| pair | prompt | prefill cortiq | prefill llama.cpp | ratio (min–max) | decode cortiq | decode llama.cpp "
          "| ratio (min–max) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    rows = []
    for pair in a.pairs:
        label, gguf, cmf = pair.split(":")
        for a.p in prompts:
            mark = len(vs.OTHERS)
            rounds = []
            for k in range(a.rounds):
                rounds.append(vs.one_round(a, cmf, gguf, k % 2 == 0, None))
                c, lw = rounds[-1]["c"], rounds[-1]["l"]
                print(f"  {label} p={a.p} round {k + 1}: prefill {c['prefill_tok_s']:.1f} / "
                      f"{sum(lw['prefill']) / len(lw['prefill']):.1f}, decode {c['decode_tok_s']:.1f} / "
                      f"{sum(lw['decode']) / len(lw['decode']):.1f}", file=sys.stderr)
            r = vs.row_of("", label, cmf, gguf, rounds)
            r["others_cores"] = vs.others_since(mark)
            rows.append(r)
            lo_p, hi_p = r["prefill_ratio_range"]
            lo_d, hi_d = r["decode_ratio_range"]
            dec = (f"{r['cortiq_decode']:.1f} | {r['llama_decode']:.1f} | {r['decode_ratio']:.2f} "
                   f"({lo_d:.2f}–{hi_d:.2f})" if a.n else "– | – | –")
            print(f"| {label} | {a.p} | {r['cortiq_prefill']:.1f} | {r['llama_prefill']:.1f} | "
                  f"{r['prefill_ratio']:.2f} ({lo_p:.2f}–{hi_p:.2f}) | {dec} |")
    print(f"\nload average at end {' '.join('%.2f' % x for x in os.getloadavg())}")
    note = vs.busy_note(rows, [])
    if note:
        print("\n" + note)


if __name__ == "__main__":
    main()
