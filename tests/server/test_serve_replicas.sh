#!/usr/bin/env bash
# Two `cortiq serve` replicas behind nginx with deploy/nginx-cortiq.conf's upstream settings, on
# loopback: 24 requests from 4 clients through nginx, one replica stopped (SIGTERM) mid-run, and
# every request still answered, the same as the replicas answer alone (skipped without nginx).
set -uo pipefail
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { echo "SKIP: nginx is not installed"; exit 77; }
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
. "${CORTIQ_SOURCE_DIR:?}/tests/server/serve_lib.sh"
m="$serve_tmp/m.cmf"
"$bin" convert --model "$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/qwen3" --quant q8 --output "$m" -q || exit 1
serve_start "$m" --parallel 2 || exit 1
a_pid=$server_pid a_port=$port a_log=$server_log
serve_start "$m" --parallel 2 || exit 1
b_pid=$server_pid b_port=$port b_log=$server_log
server_pid=
nginx_pid=
trap 'kill $a_pid $b_pid $nginx_pid 2>/dev/null; rm -rf "$serve_tmp"' EXIT
lb_port=$(python3 -S -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$serve_tmp/nginx"
# the upstream and proxy settings of deploy/nginx-cortiq.conf, on this test's ports
sed -e "s/127.0.0.1:8081/127.0.0.1:$a_port/; s/127.0.0.1:8082/127.0.0.1:$b_port/; s/127.0.0.1:8080/127.0.0.1:$lb_port/" \
    "$CORTIQ_SOURCE_DIR/deploy/nginx-cortiq.conf" >"$serve_tmp/nginx/cortiq.conf"
cat >"$serve_tmp/nginx/nginx.conf" <<CONF
daemon off;
pid $serve_tmp/nginx/nginx.pid;
error_log $serve_tmp/nginx/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $serve_tmp/nginx/body;
    proxy_temp_path $serve_tmp/nginx/proxy;
    include $serve_tmp/nginx/cortiq.conf;
}
CONF
"$nginx_bin" -p "$serve_tmp/nginx" -c "$serve_tmp/nginx/nginx.conf" &
nginx_pid=$!
for _ in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:$lb_port/health" && break; sleep 0.1; done
fail=0
python3 -S - "http://127.0.0.1:$lb_port" "$a_pid" <<'PY' || fail=1
import http.client, json, os, signal, sys, threading, time, urllib.parse
base, victim = sys.argv[1], int(sys.argv[2])
u = urllib.parse.urlparse(base)
def ask(p):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": p}], "max_tokens": 24, "temperature": 0}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read()
    return r.status, json.loads(body)["choices"][0]["message"]["content"] if r.status == 200 else body
prompts = ["Tell me a story", "Hello there", "Count to five", "Say hi"]
alone = {p: ask(p)[1] for p in prompts}
bad, done = [], [0]
lock = threading.Lock()
def client(k):
    for i in range(k, 24, 4):
        st, text = ask(prompts[i % 4])
        with lock:
            if st != 200 or text != alone[prompts[i % 4]]:
                bad.append("request %d: %s %r" % (i, st, text))
            done[0] += 1
        if i == 8:
            os.kill(victim, signal.SIGTERM)  # one replica leaves mid-run
ts = [threading.Thread(target=client, args=(k,)) for k in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print("answered %d of 24 through nginx, one replica stopped mid-run" % (done[0] - len(bad)))
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad or done[0] != 24 else 0)
PY
wait "$a_pid"; rc=$?
[ $rc -eq 0 ] || { echo "FAIL: the stopped replica exited $rc"; fail=1; }
a_pid=
kill -0 "$b_pid" 2>/dev/null || { echo "FAIL: replica B (port $b_port) exited"; fail=1; }
# a failure shows nginx's side (which upstream refused or reset, and when) and the replicas'
if [ $fail -ne 0 ]; then
    echo "nginx error.log (replica A: port $a_port, stopped; B: port $b_port):"
    cat "$serve_tmp/nginx/error.log"
    echo "replica A's log:"; cat "$a_log"
    echo "replica B's log:"; cat "$b_log"
fi
exit $fail
