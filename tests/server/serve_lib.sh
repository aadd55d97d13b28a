# serve_lib.sh - sourced by the server tests: start `cortiq serve` on a free loopback port and
# stop it at exit.
#   serve_start MODEL [options...]   sets $port, $base (http://127.0.0.1:PORT), $server_pid and
#                                    $server_log (the first server's is $serve_tmp/server.log,
#                                    a later one's server.N.log: each its own stderr)
#   serve_stop                       SIGTERM, wait; returns the server's exit status
bin=${CORTIQ_BIN:?}
serve_tmp=$(mktemp -d)
server_pid=
serve_started=0
serve_cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
    rm -rf "$serve_tmp"
}
trap serve_cleanup EXIT

serve_start() {
    local log="$serve_tmp/server.log"
    [ $serve_started -eq 0 ] || log="$serve_tmp/server.$serve_started.log"
    serve_started=$((serve_started + 1))
    server_log=$log
    "$bin" serve "$@" --port 0 2>"$log" &
    server_pid=$!
    for _ in $(seq 600); do
        port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$log")
        [ -n "$port" ] && break
        kill -0 "$server_pid" 2>/dev/null || { echo "server exited:"; cat "$log"; return 1; }
        sleep 0.05
    done
    [ -n "$port" ] || { echo "server did not start:"; cat "$log"; return 1; }
    base="http://127.0.0.1:$port"
}

serve_stop() {
    kill -TERM "$server_pid"
    wait "$server_pid"
    local rc=$?
    server_pid=
    return $rc
}
