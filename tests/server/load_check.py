"""Concurrency check for `cortiq serve` (stdlib only): every prompt is first served alone
(greedy), then CLIENTS threads send REQUESTS requests between them, some streamed, some
dropped by the client part-way (a closed socket); every answer that completes must equal the
one served alone, and the server must still answer afterwards.
usage: load_check.py BASE_URL REQUESTS CLIENTS"""
import http.client
import json
import socket
import sys
import threading
import urllib.parse

base, total, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
host = urllib.parse.urlparse(base)
PROMPTS = ["Tell me a story", "What is two plus two?", "Name three colours", "Hello there",
           "Write a haiku about the sea", "Why is the sky blue?", "Count to five", "Say hi"]
MAX_TOKENS = 24


def body(prompt, stream):
    return json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": MAX_TOKENS,
                       "temperature": 0, "stream": stream})


def whole(prompt):
    c = http.client.HTTPConnection(host.hostname, host.port, timeout=120)
    c.request("POST", "/v1/chat/completions", body(prompt, False), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        return r.status, None
    return 200, json.loads(data)["choices"][0]["message"]["content"]


def streamed(prompt, drop_after=None):
    c = http.client.HTTPConnection(host.hostname, host.port, timeout=120)
    c.request("POST", "/v1/chat/completions", body(prompt, True), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        r.read()
        return r.status, None
    text, n = [], 0
    for line in r:
        line = line.decode().strip()
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            break
        n += 1
        if drop_after is not None and n >= drop_after:
            c.sock.shutdown(socket.SHUT_RDWR)  # the client goes away mid-answer
            c.close()
            return None, None
        delta = json.loads(line[6:])["choices"][0]["delta"]
        text.append(delta.get("content") or "")
    c.close()
    return 200, "".join(text)


def dropped_whole(prompt):
    """A whole answer the client stops waiting for."""
    s = socket.create_connection((host.hostname, host.port))
    b = body(prompt, False).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(b) + b)
    s.close()


alone = {p: whole(p)[1] for p in PROMPTS}
assert all(v is not None for v in alone.values()), alone
errors, done, dropped, busy = [], [0], [0], [0]
lock = threading.Lock()


def client(k):
    for i in range(k, total, clients):
        p = PROMPTS[i % len(PROMPTS)]
        kind = i % 5
        if kind == 3:
            streamed(p, drop_after=2 + i % 4)
            with lock:
                dropped[0] += 1
            continue
        if kind == 4 and i % 2:
            dropped_whole(p)
            with lock:
                dropped[0] += 1
            continue
        status, text = streamed(p) if kind in (1, 2) else whole(p)
        with lock:
            if status in (429, 503):
                busy[0] += 1
            elif status != 200:
                errors.append("request %d: HTTP %s" % (i, status))
            elif text != alone[p]:
                errors.append("request %d (%r): %r != alone %r" % (i, p, text, alone[p]))
            else:
                done[0] += 1


threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
status, text = whole(PROMPTS[0])
if status != 200 or text != alone[PROMPTS[0]]:
    errors.append("after the load: HTTP %s %r" % (status, text))
print("completed %d, dropped by the client %d, refused busy %d" % (done[0], dropped[0], busy[0]))
for e in errors:
    print("FAIL:", e)
sys.exit(1 if errors or done[0] == 0 else 0)
