#!/usr/bin/env python3
"""Aggregate decode rate and time to first token of an OpenAI-compatible server (`cortiq serve`,
llama-server, ...) under S concurrent streaming chat requests, for each S given.
usage: serve_load.py BASE_URL [--tokens N] [--streams 1,2,4,8] [--rounds R] [--warm W]
                     [--alternate]
Each stream asks for a long story (greedy, max_tokens N) and reads the SSE chunks; a round's
aggregate rate is the completion tokens of all its streams over the round's wall time after the
last first token (decode only), and TTFT is per request. The rate columns and the first TTFT pair
are the best round's; the last pair is the median and the 99th percentile (nearest rank) of every
request of the R rounds. --warm W runs W rounds first that count nowhere: their prompts fill the
slots, so the counted requests find all but their prompt's last tokens in the server's prefix
cache, as a chat's next turn does. --alternate runs round r of every stream count back to back
(1, 4, 1, 4, ...) and adds each count's rate over the first count's, per round pair: on a host
whose speed drifts by tens of percent within minutes, the ratio of neighbouring rounds holds
where the best rounds of two separate runs do not. Stdlib only."""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("base")
ap.add_argument("--tokens", type=int, default=64)
ap.add_argument("--streams", default="1,2,4,8")
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--warm", type=int, default=0)
ap.add_argument("--alternate", action="store_true",
                help="interleave the stream counts round by round and print each count's rate over "
                     "the first count's, per round pair (the median and the range)")
a = ap.parse_args()
u = urllib.parse.urlparse(a.base)


def one(i, out):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Write a long story about a dragon, number %d." % i}],
                       "max_tokens": a.tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    t0 = time.monotonic()
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    first, tokens = None, 0
    for line in r:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        d = json.loads(line[6:])
        if d.get("usage"):
            tokens = d["usage"]["completion_tokens"]
        elif first is None and d["choices"] and d["choices"][0]["delta"].get("content"):
            first = time.monotonic()
    out[i] = (t0, first or time.monotonic(), time.monotonic(), tokens)


def run_round(s):
    out = [None] * s
    th = [threading.Thread(target=one, args=(i, out)) for i in range(s)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    return out


def measure(s):
    out = run_round(s)
    start = max(o[1] for o in out)
    end = max(o[2] for o in out)
    # tokens decoded after the last stream's first token, estimated per stream at its own rate
    dec = sum(o[3] * max(0.0, o[2] - start) / max(1e-9, o[2] - o[1]) for o in out)
    agg = dec / max(1e-9, end - start)
    ttft = sorted(o[1] - o[0] for o in out)
    per = statistics.mean(o[3] / max(1e-9, o[2] - o[1]) for o in out)
    return (agg, per, statistics.median(ttft), ttft[-1]), ttft


counts = [int(x) for x in a.streams.split(",")]
rows = {s: [] for s in counts}
ttfts = {s: [] for s in counts}
# --alternate: round r of every count back to back, so that a drift of the host hits all alike
order = ([s for _ in range(a.rounds) for s in counts] if a.alternate
         else [s for s in counts for _ in range(a.rounds)])
for s in order:
    if not rows[s]:  # a count's warm rounds just before its first counted one
        for _ in range(a.warm):
            run_round(s)
    row, t = measure(s)
    rows[s].append(row)
    ttfts[s] += t

print("streams  aggregate decode tok/s  per-stream tok/s  TTFT p50 s  TTFT max s"
      "  all rounds: TTFT p50 s  p99 s")
for s in counts:
    best = max(rows[s], key=lambda r: r[0])
    t = sorted(ttfts[s])
    p99 = t[max(0, -(-99 * len(t) // 100) - 1)]
    print("%7d  %22.1f  %16.1f  %10.3f  %10.3f  %22.3f  %5.3f"
          % ((s,) + best + (statistics.median(t), p99)))
if a.alternate and len(counts) > 1:
    base = counts[0]
    print("aggregate over %d-stream rate, per round pair: median (min - max)" % base)
    for s in counts[1:]:
        r = sorted(x[0] / max(1e-9, y[0]) for x, y in zip(rows[s], rows[base]))
        print("%7d  %.2f (%.2f - %.2f)" % (s, statistics.median(r), r[0], r[-1]))
