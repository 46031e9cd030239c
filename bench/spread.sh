#!/usr/bin/env bash
# The seed's broadcast latency test: CLIENTS (default 1000) WebSocket clients in
# one moonwire process, a moonwire server in another, ROUNDS (default 100)
# timestamped broadcasts. Prints one JSON line: spread (first to last receipt)
# and latency percentiles in milliseconds.
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-1000}
rounds=${2:-100}
ulimit -n $((clients * 2 + 256))
bin="${MOONWIRE_BIN:-$(swift build -c release --product moonwire >/dev/null && swift build -c release --show-bin-path)/moonwire}"
out=$(mktemp)
"$bin" run bench/spread_server.lua ws://127.0.0.1:0/ "$clients" "$rounds" > "$out" &
server=$!
trap 'kill -9 $server 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 100); do grep -q READY "$out" && break; sleep 0.05; done
url=$(awk '/READY/{print $2}' "$out")
"$bin" run bench/spread_clients.lua "$url" "$clients" "$rounds"
