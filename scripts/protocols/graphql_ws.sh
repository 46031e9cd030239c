#!/usr/bin/env bash
# moonwire.graphql_ws against real GraphQL peers:
#  1. the bot example (both subprotocols) and examples/protocols/graphql_ws_test.lua
#     against Strawberry on aiohttp (scripts/protocols/graphql_server.py), which
#     serves graphql-transport-ws and the legacy graphql-ws on one endpoint;
#  2. the mock (examples/graphql_ws_mock.lua) against the Python `gql` client over
#     both subprotocols (scripts/protocols/graphql_ws_client.py);
#  3. the reconnect, once per subprotocol: examples/protocols/graphql_ws_reconnect.lua
#     reads a subscription, the server is killed (SIGKILL) and started again on the
#     same port, the module re-subscribes and the loop reads on.
# Stops what it started by PID; exits 1 on any failure. About 17 s (most of it Strawberry starting, three times).
# usage: MOONWIRE_BIN=PATH scripts/protocols/graphql_ws.sh
source "$(dirname "$0")/lib/python_server.sh"

start_server() { # [PORT] -> sets server_pid, port
    "$PY" scripts/protocols/graphql_server.py "${1:-0}" >"$tmp/server.log" 2>&1 &
    server_pid=$!; pids+=("$server_pid")
    wait_line "$tmp/server.log" '^READY '
    port=$(sed -n 's/^READY //p' "$tmp/server.log")
}

start=$(date +%s)
start_server
url="ws://127.0.0.1:$port/graphql"

for protocol in graphql-transport-ws graphql-ws; do
    echo "-- bot ($protocol)" >&2
    "$MOONWIRE_BIN" run examples/graphql_ws_bot.lua "$url" "$protocol" | tee "$tmp/bot.log"
    grep -q "^speaking $protocol\$" "$tmp/bot.log"
    grep -q '^done$' "$tmp/bot.log"
done

echo "-- moonwire connect --protocol graphql-ws from a pipe" >&2
out=$(printf 'query { add(a: 2, b: 3) }\nsubscription { count(to: 3) }\n' | "$MOONWIRE_BIN" connect --protocol graphql-ws "$url")
[ "$out" = $'{"add":5}\n[1] {"count":1}\n[1] {"count":2}\n[1] {"count":3}' ] ||
    { echo "connect --protocol graphql-ws printed:" >&2; echo "$out" >&2; exit 1; }

echo "-- tests" >&2
GRAPHQL_WS_URL="$url" "$MOONWIRE_BIN" test examples/protocols/graphql_ws_test.lua

echo "-- mock vs the gql client" >&2
"$MOONWIRE_BIN" run examples/graphql_ws_mock.lua >"$tmp/mock.log" 2>&1 &
pids+=($!)
wait_line "$tmp/mock.log" '^READY '
"$PY" scripts/protocols/graphql_ws_client.py "ws://127.0.0.1:$(sed -n 's/^READY //p' "$tmp/mock.log")/graphql"

for protocol in graphql-transport-ws graphql-ws; do
    echo "-- reconnect ($protocol)" >&2
    "$MOONWIRE_BIN" run examples/protocols/graphql_ws_reconnect.lua "$url" "$protocol" >"$tmp/reconnect.log" 2>&1 &
    rc_pid=$!; pids+=("$rc_pid")
    wait_line "$tmp/reconnect.log" '^subscribed'
    kill -9 "$server_pid"; wait "$server_pid" 2>/dev/null || true
    start_server "$port"
    status=0; wait "$rc_pid" || status=$?
    cat "$tmp/reconnect.log"
    [ "$status" -eq 0 ] || { echo "reconnect script failed ($status)" >&2; exit 1; }
    grep -q "^reconnected: $protocol, 1 subscription(s) sent again\$" "$tmp/reconnect.log"
    grep -q '^done$' "$tmp/reconnect.log"
done
echo "graphql_ws: all passed in $(( $(date +%s) - start )) s" >&2
