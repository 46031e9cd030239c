#!/usr/bin/env bash
# MQTT publish -> receive throughput through one mosquitto (Debian's, on a free loopback
# port, plain TCP): moonwire's require "moonwire.mqtt" against paho-mqtt (PyPI, installed
# in a venv here), at QoS 0 and QoS 1, in the same run, alternating, REPEAT times each.
# Each run: one subscriber and one publisher connection in one process, N messages of
# SIZE bytes (N0 at QoS 0, N1 at QoS 1), timed from the first publish to the last message received.
# Prints a Markdown table (median msgs/s of each) and writes bench/results/mqtt.json.
#
# usage: MOONWIRE_BIN=PATH bench/mqtt/run.sh     (N0=50000 N1=10000 SIZE=64 REPEAT=3 VENV=/tmp/mwvenv)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${MOONWIRE_BIN:=$(swift build -c release --show-bin-path)/moonwire}"
N0=${N0:-50000} N1=${N1:-10000} SIZE=${SIZE:-64} REPEAT=${REPEAT:-3} VENV=${VENV:-/tmp/mwvenv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -c 'import paho.mqtt' 2>/dev/null \
    || "$VENV/bin/pip" install -q --disable-pip-version-check 'paho-mqtt>=2,<3'

dir=$(mktemp -d /tmp/moonwire-mqtt-bench.XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$dir/mosquitto.conf" <<CONF
listener $port 127.0.0.1
allow_anonymous true
max_queued_messages 0
max_inflight_messages 20
CONF
/usr/sbin/mosquitto -c "$dir/mosquitto.conf" >"$dir/mosquitto.log" 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null; wait $broker 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done

: >"$dir/runs.jsonl"
for qos in 0 1; do
    N=$N0; [ "$qos" = 1 ] && N=$N1
    for r in $(seq "$REPEAT"); do
        "$MOONWIRE_BIN" run bench/mqtt/moonwire_client.lua "$port" "$qos" "$N" "$SIZE" >>"$dir/runs.jsonl"
        "$VENV/bin/python" bench/mqtt/paho_client.py --port "$port" --qos "$qos" --n "$N" --size "$SIZE" >>"$dir/runs.jsonl"
    done
done
mkdir -p bench/results
python3 - "$dir/runs.jsonl" "$N0/$N1" "$SIZE" "$REPEAT" "$(/usr/sbin/mosquitto -h | head -1)" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
n, size, repeat, broker = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
print(f"MQTT publish -> receive through {broker}, TCP loopback, {n} messages (QoS 0 / QoS 1) of {size} B, median of {repeat}:\n")
print("| QoS | moonwire msgs/s | paho-mqtt msgs/s | moonwire / paho |")
print("|---|---|---|---|")
summary = {}
for qos in (0, 1):
    med = {}
    for client in ("moonwire", "paho-mqtt"):
        rs = [r for r in runs if r["client"] == client and r["qos"] == qos]
        assert all(r["ok"] and r["received"] == r["n"] for r in rs), rs
        med[client] = statistics.median(r["msgs_per_s"] for r in rs)
    summary[qos] = med
    print(f"| {qos} | {med['moonwire']:,.0f} | {med['paho-mqtt']:,.0f} | {med['moonwire'] / med['paho-mqtt']:.2f} |")
json.dump({"broker": broker, "n": n, "size": int(size), "repeat": int(repeat), "median": summary, "runs": runs},
          open("bench/results/mqtt.json", "w"), indent=1)
PY
