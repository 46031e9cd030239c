#!/usr/bin/env bash
# N (default 1000) connections with a 1 s heartbeat held for SECONDS (default
# 30) against a moonwire server in another process; prints the client's CPU
# percent (of one core) over the hold and its RSS at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
seconds=${2:-30}
ulimit -n $((n * 2 + 256))
bin="${MOONWIRE_BIN:-$(scripts/release_build.sh --product moonwire >/dev/null && scripts/release_build.sh --show-bin-path)/moonwire}"
srv_out=$(mktemp)
cat > "${srv_out}.lua" <<'LUA'
local s = assert(mw.listen("ws://127.0.0.1:0/"))
io.stdout:write("READY ", s:url(), "\n") io.stdout:flush()
LUA
"$bin" run "${srv_out}.lua" > "$srv_out" &
server=$!
trap 'kill -9 $server ${client:-} 2>/dev/null || true; rm -f "$srv_out" "${srv_out}.lua"' EXIT
for _ in $(seq 100); do grep -q READY "$srv_out" && break; sleep 0.05; done
url=$(awk '/READY/{print $2}' "$srv_out")
cli_out=$(mktemp)
"$bin" run bench/heartbeat_conns.lua "$url" "$n" 1 "$seconds" > "$cli_out" &
client=$!
sleep 3   # let the connections open before measuring
ticks() { awk '{print $14 + $15}' "/proc/$client/stat"; }
t0=$(ticks); s0=$(date +%s.%N)
sleep $((seconds - 5))
t1=$(ticks); s1=$(date +%s.%N)
rss_kib=$(awk '/VmRSS/{print $2}' "/proc/$client/status")
wait $client || true
hz=$(getconf CLK_TCK)
cpu=$(echo "($t1 - $t0) / $hz / ($s1 - $s0) * 100" | bc -l)
printf '{"connections":%d,"cpu_percent":%.2f,"rss_mib":%.1f,"rss_kib_per_connection":%.2f,"client":%s}\n' \
  "$n" "$cpu" "$(echo "$rss_kib / 1024" | bc -l)" "$(echo "$rss_kib / $n" | bc -l)" "$(cat "$cli_out" | tail -1)"
rm -f "$cli_out"
