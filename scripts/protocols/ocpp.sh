#!/usr/bin/env bash
# moonwire.ocpp against the real `ocpp` library (mobilityhouse, PyPI) in the venv:
# a Python central system for moonwire's charge point (examples/ocpp_bot.lua,
# examples/protocols/ocpp_test.lua), Python charge points for moonwire's central system
# (the same test file, and examples/ocpp_mock.lua), then the reconnect test, which stops
# the Python central system and starts it again on the same port.
# usage: MOONWIRE_BIN=PATH scripts/protocols/ocpp.sh      (run from anywhere; 14.5 s measured)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${MOONWIRE_BIN:?set MOONWIRE_BIN to the moonwire binary}"
PY=$(Tests/MoonwireCoreTests/Peers/setup_venv.sh)
PEERS=$PWD/Tests/MoonwireCoreTests/Peers
WORK=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}" $(cat "$WORK/cs.pid" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Waits (at most 20 s) for a line matching $2 in the file $1.
wait_for_line() {
    for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    echo "ocpp.sh: gave up waiting for '$2' in $1:" >&2; cat "$1" >&2; return 1
}

CS_PORT=$(free_port)
export OCPP_CS_URL="ws://127.0.0.1:$CS_PORT/ocpp" OCPP_PYTHON=$PY OCPP_PEERS=$PEERS
# The central system writes its PID to cs.pid (the reconnect test stops and starts it again).
export OCPP_CS_START="$PY $PEERS/ocpp_central_system.py $CS_PORT >>$WORK/cs.log 2>&1 & echo \$! >$WORK/cs.pid"
export OCPP_CS_STOP="kill \$(cat $WORK/cs.pid)"
# Seconds since $1 (a date +%s.%N), to one decimal.
since() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }'; }
started=$(date +%s.%N)
sh -c "$OCPP_CS_START"
wait_for_line "$WORK/cs.log" "listening $CS_PORT"

echo "-- bot (OCPP 1.6 and 2.0.1) against the Python central system" >&2
for version in 1.6 2.0.1; do
    "$MOONWIRE_BIN" run examples/ocpp_bot.lua "$OCPP_CS_URL" "$version" 2 | tee "$WORK/bot.out"
    grep -q "^booted (OCPP $version, reconnects 0): Accepted" "$WORK/bot.out"
    grep -q "^heartbeat 2: " "$WORK/bot.out"
done

echo "-- moonwire connect --protocol ocpp from a pipe (a CALL, and a bare line as a CALL)" >&2
out=$(printf 'call Authorize {"idTag": "bad"}\nHeartbeat\n' | "$MOONWIRE_BIN" connect --protocol ocpp "$OCPP_CS_URL/CP_HAND")
[ "$(echo "$out" | head -1)" = 'CALLRESULT Authorize {"idTagInfo":{"status":"Invalid"}}' ] &&
    echo "$out" | sed -n 2p | grep -q '^CALLRESULT Heartbeat {"currentTime":"' ||
    { echo "connect --protocol ocpp printed:" >&2; echo "$out" >&2; exit 1; }

echo "-- tests against the Python central system and charge points" >&2
"$MOONWIRE_BIN" test examples/protocols/ocpp_test.lua

echo "-- the mock central system (examples/ocpp_mock.lua) against Python charge points" >&2
MOCK_PORT=$(free_port)
"$MOONWIRE_BIN" run examples/ocpp_mock.lua "ws://127.0.0.1:$MOCK_PORT/ocpp" 2 >"$WORK/mock.out" 2>&1 &
mock=$!; pids+=("$mock")
wait_for_line "$WORK/mock.out" "central system on"
"$PY" "$PEERS/ocpp_charge_point.py" "ws://127.0.0.1:$MOCK_PORT/ocpp" py16 1.6 1 &
pids+=("$!")
"$PY" "$PEERS/ocpp_charge_point.py" "ws://127.0.0.1:$MOCK_PORT/ocpp" py201 2.0.1 1
wait "$mock" || { cat "$WORK/mock.out" >&2; exit 1; }
cat "$WORK/mock.out"
grep -q "^py16: Reset Accepted" "$WORK/mock.out"
grep -q "^py201: Reset Accepted" "$WORK/mock.out"

echo "-- reconnect: the Python central system stopped and started again" >&2
"$MOONWIRE_BIN" test examples/protocols/ocpp_reconnect_test.lua

echo "ocpp.sh: passed in $(since $started) s" >&2
