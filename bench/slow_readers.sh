#!/usr/bin/env bash
# N connections (default 10 000) whose peer stops reading while the script sends: the
# process-wide send budget bounds the client's memory. The server
# (bench/peers/slow_readers_server.py) accepts raw TCP and reads nothing; the client
# (bench/clients/slow_readers_client.lua) sends 16 KiB messages on every connection until
# it is refused once (its own 16 MiB budget, or the process's); then the server reads
# again and the client waits until everything it took has left, closes, and reports.
# Prints one JSON line: peak RSS (VmHWM), RSS with the connections open before sending,
# the process budget, refusals by kind, bytes taken and bytes the server received.
#   bench/slow_readers.sh [N] [BUDGET]     BUDGET as --send-budget: 256M (default), 1G, 0
# HOST (default: this machine's first non-loopback address, else 127.0.0.1): moonwire
# sizes the kernel's send buffer of a 127.0.0.0/8 connection at 1 MiB, which for 10 000
# stalled connections is 20 GB the kernel would try to hold (the machine's TCP memory
# limit); another local address leaves the kernel's small default.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/ready.sh
n=${1:-10000}
budget=${2:-256M}
host=${HOST:-$(hostname -I 2>/dev/null | awk '{print $1}')}
host=${host:-127.0.0.1}
ulimit -n "$(ulimit -Hn)"
bin="${MOONWIRE_BIN:-$(scripts/release_build.sh --product moonwire >/dev/null && scripts/release_build.sh --show-bin-path)/moonwire}"
work=$(mktemp -d)
trap 'kill -9 ${server:-} ${client:-} 2>/dev/null || true; rm -rf "$work"' EXIT
python3 bench/peers/slow_readers_server.py "$host" > "$work/server" &
server=$!
port=$(ready_address "$work/server")
"$bin" run --send-budget "$budget" bench/clients/slow_readers_client.lua "tcp://$host:$port" "$n" "$work/gate" \
  > "$work/client" 2> "$work/client.err" &
client=$!
wait_line "$work/client" FILLED $client 300 || { cat "$work/client" "$work/client.err" >&2; exit 1; }
kill -USR1 $server
touch "$work/gate"
wait $client
wait $server
field() { grep -o "$1=[0-9.]*" "$work/$2" | head -1 | cut -d= -f2; }
taken=$(field taken client)
received=$(field bytes server)
warnings=$(grep -c "process send budget .* is reached" "$work/client.err" || true)
printf '{"connections":%d,"opened":%d,"budget":"%s","budget_bytes":%d,"vmhwm_mib":%.1f,"rss_open_mib":%.1f,"rss_full_mib":%.1f,"buffered_full_mib":%.1f,"refusals_own":%d,"refusals_process":%d,"refusals_other":%d,"warnings":%d,"taken_bytes":%d,"received_bytes":%d,"nothing_lost":%s,"dropped":%d,"fill_s":%s,"empty_s":%s}\n' \
  "$n" "$(field opened client)" "$budget" "$(field budget client)" \
  "$(echo "$(field vmhwm_kib client) / 1024" | bc -l)" "$(echo "$(field rss_open_kib client) / 1024" | bc -l)" \
  "$(echo "$(field rss_full_kib client) / 1024" | bc -l)" "$(echo "$(field buffered client) / 1048576" | bc -l)" \
  "$(field refusals_own client)" "$(field refusals_process client)" "$(field refusals_other client)" "$warnings" \
  "$taken" "$received" "$([ "$taken" = "$received" ] && echo true || echo false)" "$(field dropped client)" \
  "$(field fill_s client)" "$(field empty_s client)"
