#!/usr/bin/env bash
# moonwire.socketio against the real python-socketio (server and client):
#  1. the bot example and examples/protocols/socketio_test.lua against
#     scripts/protocols/socketio_server.py (python-socketio on aiohttp);
#  2. the mock (examples/socketio_mock.lua) against python-socketio's client
#     (scripts/protocols/socketio_client.py);
#  3. the reconnect: examples/protocols/socketio_reconnect.lua joins two
#     namespaces, the server is killed (SIGKILL) and started again on the same
#     port, the script re-joins both and exchanges messages again.
# Stops what it started by PID; exits 1 on any failure. About 12 s.
# usage: MOONWIRE_BIN=PATH scripts/protocols/socketio.sh
source "$(dirname "$0")/lib/python_server.sh"

start_server() { # [PORT] -> sets server_pid, port
    "$PY" scripts/protocols/socketio_server.py "${1:-0}" >"$tmp/server.log" 2>&1 &
    server_pid=$!; pids+=("$server_pid")
    wait_line "$tmp/server.log" '^READY '
    port=$(sed -n 's/^READY //p' "$tmp/server.log")
}

start=$(date +%s)
start_server
url="http://127.0.0.1:$port"

echo "-- bot" >&2
"$MOONWIRE_BIN" run examples/socketio_bot.lua "$url" | tee "$tmp/bot.log"
grep -q '^done$' "$tmp/bot.log"

echo "-- moonwire connect --protocol socketio from a pipe" >&2
out=$(printf 'call add 2 3\nemit echo "hi" 2\n' | "$MOONWIRE_BIN" connect --protocol socketio "$url")
[ "$out" = $'ack 5\necho "hi" 2' ] || { echo "connect --protocol socketio printed:" >&2; echo "$out" >&2; exit 1; }

echo "-- tests" >&2
SOCKETIO_URL="$url" "$MOONWIRE_BIN" test examples/protocols/socketio_test.lua

echo "-- mock vs python-socketio client" >&2
"$MOONWIRE_BIN" run examples/socketio_mock.lua >"$tmp/mock.log" 2>&1 &
pids+=($!)
wait_line "$tmp/mock.log" '^READY '
"$PY" scripts/protocols/socketio_client.py "http://127.0.0.1:$(sed -n 's/^READY //p' "$tmp/mock.log")"

echo "-- reconnect" >&2
"$MOONWIRE_BIN" run examples/protocols/socketio_reconnect.lua "$url" >"$tmp/reconnect.log" 2>&1 &
rc_pid=$!; pids+=("$rc_pid")
wait_line "$tmp/reconnect.log" '^joined'
kill -9 "$server_pid"; wait "$server_pid" 2>/dev/null || true
wait_line "$tmp/reconnect.log" '^disconnected'
start_server "$port"
status=0; wait "$rc_pid" || status=$?
cat "$tmp/reconnect.log"
[ "$status" -eq 0 ] || { echo "reconnect script failed ($status)" >&2; exit 1; }
grep -q $'^rejoined\t/ /chat$' "$tmp/reconnect.log"
grep -q $'^echo\tsent while down$' "$tmp/reconnect.log"
grep -q '^auth asked 2 times$' "$tmp/reconnect.log"
grep -q '^done$' "$tmp/reconnect.log"
echo "socketio: all passed in $(( $(date +%s) - start )) s" >&2
