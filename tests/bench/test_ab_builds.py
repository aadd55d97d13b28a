#!/usr/bin/env python3
"""bench/ab_builds' reading and arithmetic: the figures of bench_tok8_multi's rows, `cortiq
bench`'s prefill / decode lines and `cortiq bench quant`'s table from captured-form outputs;
the rounds alternating which side runs first; each side's best (a time's least, a rate's
greatest) and B's speed against A's; a failing command stops the comparison; and the real
`cortiq bench quant` table read end to end.

usage: test_ab_builds.py CORTIQ_BIN SOURCE_DIR        (stdlib only)
"""
import os
import subprocess
import sys
import tempfile

from bench_script import Checks, load

cortiq, root = sys.argv[1], sys.argv[2]
script = os.path.join(root, "bench", "ab_builds")
ab = load(root, "ab_builds")
picks = [(ab.re.compile(p), h) for p, h in ab.BUILTIN]
check = Checks()


# bench_tok8_multi: the first time column, less is better; the header lines give nothing
tok8 = """2048 x 640, pieces of 64 rows, us per step (thread CPU, best of 5)
dtype          tokens  int8 alone  int8 multi  multi/alone   f32 alone   f32 multi  multi/alone
q4tp                1        65.4        66.0         1.01           -           -            -
q4tp+lanes          1        41.5        40.2         0.97           -           -            -
vbit:45+lanes       2        80.0        61.0         0.76           -           -            -
"""
f = ab.figures(tok8, picks)
check(f"tok8 keys {sorted(f)}", sorted(f) == ["q4tp 1", "q4tp+lanes 1", "vbit:45+lanes 2"])
check("tok8 value", f.get("q4tp+lanes 1") == (41.5, False))

# cortiq bench: tok/s, more is better
cb = """/x/m.cmf: 2 threads, load 0.001 s, one warm-up round
  prefill 256 tokens: 553.0 ± 4.6 tok/s (396 GFLOP/s in the layers' products)
  decode 64 tokens: 84.70 ± 2.80 tok/s (20.1 GB/s of weights)
"""
f = ab.figures(cb, picks)
check(f"bench keys {f}", f == {"prefill 256 tokens": (553.0, True), "decode 64 tokens": (84.7, True)})

# cortiq bench quant: each "wall" column and its % of the probe, per matrix and dtype
bq = """Read bandwidth (2 threads summing 1024 MiB): 29.1 GB/s wall, 29.2 GB/s cpu.
| matrix | dtype | bits/weight | rel. RMSE | wall GB/s | % | cpu GB/s | % | int8-act wall | % | int8-act cpu | % | decode copy wall | % | read bw nearby |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| Gaussian | q4tp | 4.213 | 0.09562 | 6.8 | 24% | 7.1 | 25% | 21.3 | 69% | 23.5 | 76% | 22.9 | 70% | 28.3 / 30.7 / 32.5 |
| Gaussian | bf16 | 16.000 | 0.00166 | 26.2 | 88% | 26.3 | 88% | - | - | - | - | - | - | 29.8 |
"""
f = ab.figures(bq, picks)
want = {"Gaussian q4tp wall GB/s": 6.8, "Gaussian q4tp wall GB/s % of probe": 24.0,
        "Gaussian q4tp int8-act wall": 21.3, "Gaussian q4tp int8-act wall % of probe": 69.0,
        "Gaussian q4tp decode copy wall": 22.9, "Gaussian q4tp decode copy wall % of probe": 70.0,
        "Gaussian bf16 wall GB/s": 26.2, "Gaussian bf16 wall GB/s % of probe": 88.0}
check(f"quant figures {f}", {k: v for k, (v, _) in f.items()} == want)
check("quant figures are rates", all(h for _, h in f.values()))
check("no table without tables", ab.figures(bq, [], tables=False) == {})

# best and speed: times by their least, rates by their greatest
check("time speed", abs(ab.speed([40.0, 30.0], [20.0, 60.0], False) - 1.5) < 1e-12)
check("rate speed", abs(ab.speed([100.0, 80.0], [50.0, 120.0], True) - 1.2) < 1e-12)
check("a rate of nothing has no speed", ab.speed([0.0, 0.0], [0.0, 0.0], True) is None)
check("a zero time has no speed", ab.speed([1.0], [0.0], False) is None)
check("the table shows no speed for it", "| - |" in ab.table({"decode": ([0.0], [0.0], True)}))

# alternation and collection, with a fake benchmark that logs who ran and prints its figure
with tempfile.TemporaryDirectory() as d:
    log = os.path.join(d, "order")
    fake = os.path.join(d, "fake.py")
    with open(fake, "w") as fh:
        fh.write("import os, sys\n"
                 f"open({log!r}, 'a').write(sys.argv[1])\n"
                 "n = len(open(" + repr(log) + ").read())\n"
                 "t = {'A': 50.0, 'B': 40.0}[sys.argv[1]] + n\n"
                 "print(f'q4tp+lanes 1 {t:.1f} 1.0 1.0')\n"
                 "print(f'  decode 8 tokens: {1000.0 / t:.2f} tok/s')\n"
                 "sys.exit(3 if os.environ.get('FAIL_' + sys.argv[1]) else 0)\n")
    a = ({}, [sys.executable, fake, "A"])
    b = ({}, [sys.executable, fake, "B"])
    got = ab.compare(a, b, 3, picks)
    check("order A B B A A B", open(log).read() == "ABBAAB")
    av, bv, higher = got["q4tp+lanes 1"]
    check(f"times {av} {bv}", av == [51.0, 54.0, 55.0] and bv == [42.0, 43.0, 46.0] and not higher)
    check("decode is a rate", got["decode 8 tokens"][2] is True)
    table = ab.table(got)
    check("table speed", "| q4tp+lanes 1 | 51.00 | 42.00 | 54.00 | 43.00 | 1.214 |" in table)
    # the command form: K=V prefixes become the environment
    env, argv = ab.parse_command(f"FAIL_B=1 X=2 {sys.executable} {fake} B")
    check("parse env", env == {"FAIL_B": "1", "X": "2"} and argv == [sys.executable, fake, "B"])
    p = subprocess.run([sys.executable, script, "-k", "2", "--a", f"{sys.executable} {fake} A",
                        "--b", f"FAIL_B=1 {sys.executable} {fake} B"], capture_output=True, text=True)
    check(f"a failing side stops it (rc {p.returncode})",
          p.returncode != 0 and "B (" in p.stderr and "exited with 3" in p.stderr)
    p = subprocess.run([sys.executable, script, "--pick", "(?P<key>x)", "--a", "true", "--b", "true"],
                       capture_output=True, text=True)
    check("a --pick without val is refused", p.returncode == 2 and "key and val" in p.stderr)

# the real table of `cortiq bench quant`, both sides the same build
p = subprocess.run([sys.executable, script, "-k", "1", "--a",
                    f"{cortiq} bench quant --model none --rows 64 --cols 256 --dtypes q4tp,f16 "
                    "--reps 1 --mb 1 --bw-mb 8", "--b",
                    f"{cortiq} bench quant --model none --rows 64 --cols 256 --dtypes q4tp,f16 "
                    "--reps 1 --mb 1 --bw-mb 8"], capture_output=True, text=True)
check(f"real bench quant (rc {p.returncode}): {p.stderr[-300:]}", p.returncode == 0)
for key in ("| Gaussian q4tp decode copy wall |", "| Gaussian f16 wall GB/s |",
            "| heavy-tailed + outlier cols q4tp int8-act wall % of probe |"):
    check(f"real bench quant row {key}", key in p.stdout)

check.finish("test_ab_builds")
