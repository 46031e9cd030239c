#!/usr/bin/env bash
# require "moonwire.mqtt" against real MQTT peers:
#  1. Debian's mosquitto on free loopback ports (TCP, WebSocket, and a TCP listener that
#     wants a user name and password), with persistence: examples/mqtt_bot.lua over both
#     transports, examples/mqtt_ws.lua, `moonwire test examples/protocols/mqtt_test.lua`
#     (MQTT 3.1.1 and 5.0, QoS 0/1/2 both ways, wildcards, retained, refused CONNACK, bad
#     packets from hostile servers) and examples/protocols/mqtt_reconnect_test.lua
#     (mosquitto stopped and started again on the same ports under the clients: sessions
#     restored, nothing lost at QoS 1), and `moonwire connect --protocol mqtt` from a pipe.
#  2. moonwire's broker stub (examples/mqtt_mock.lua) against the real clients
#     mosquitto_sub and mosquitto_pub: retained, QoS 0 and 1 routing through wildcards.
# Stops what it started by PID; exits non-zero on any failure. About 15 s.
#
# usage: MOONWIRE_BIN=PATH scripts/protocols/mqtt.sh
#        scripts/protocols/mqtt.sh broker start|stop DIR   (the reconnect test's hooks)
set -uo pipefail
cd "$(dirname "$0")/../.."

# Waits until something listens on 127.0.0.1:$1 (at most 10 s).
wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "mqtt.sh: nothing listens on port $1" >&2
    return 1
}

# mosquitto as a daemon with the config in DIR; it writes its PID to DIR/mosquitto.pid.
broker() {
    local action=$1 dir=$2
    case "$action" in
    start)
        rm -f "$dir/mosquitto.pid"
        /usr/sbin/mosquitto -d -c "$dir/mosquitto.conf" 2>>"$dir/mosquitto.err" || return 1
        for port in $(cat "$dir/ports"); do wait_port "$port" || return 1; done
        ;;
    stop)
        # SIGTERM: mosquitto saves its sessions (persistence) and exits.
        local pid
        pid=$(cat "$dir/mosquitto.pid" 2>/dev/null) || return 0
        kill -TERM "$pid" 2>/dev/null
        while kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
        ;;
    esac
}

if [ "${1:-}" = "broker" ]; then
    broker "$2" "$3"
    exit $?
fi

: "${MOONWIRE_BIN:=$(swift build --show-bin-path)/moonwire}"
MW="$MOONWIRE_BIN"
dir=$(mktemp -d /tmp/moonwire-mqtt.XXXXXX)
mock_pid="" sub1="" sub2=""
cleanup() {
    broker stop "$dir"
    for pid in $mock_pid $sub1 $sub2; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
    rm -rf "$dir"
}
trap cleanup EXIT

free_ports() {
    python3 -c 'import socket
ss = [socket.socket() for _ in range('"$1"')]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))'
}
read -r tcp_port ws_port auth_port mock_port <<<"$(free_ports 4)"
echo "$tcp_port $ws_port $auth_port" >"$dir/ports"
mosquitto_passwd -c -b "$dir/passwd" moonwire s3cret
# user root: mosquitto started as root would switch to its own user, who cannot write
# the PID file and the persistence in this root-owned temporary folder.
cat >"$dir/mosquitto.conf" <<EOF
user root
pid_file $dir/mosquitto.pid
persistence true
persistence_location $dir/
log_dest file $dir/mosquitto.log
per_listener_settings true
listener $tcp_port 127.0.0.1
allow_anonymous true
listener $ws_port 127.0.0.1
protocol websockets
allow_anonymous true
listener $auth_port 127.0.0.1
allow_anonymous false
password_file $dir/passwd
EOF
broker start "$dir" || { cat "$dir/mosquitto.log" >&2; exit 1; }

export MQTT_TCP_URL="tcp://127.0.0.1:$tcp_port"
export MQTT_WS_URL="ws://127.0.0.1:$ws_port/"
export MQTT_AUTH_URL="tcp://127.0.0.1:$auth_port"
export MQTT_USER=moonwire MQTT_PASSWORD=s3cret
export MQTT_BROKER_STOP="bash scripts/protocols/mqtt.sh broker stop $dir"
export MQTT_BROKER_START="bash scripts/protocols/mqtt.sh broker start $dir"

failed=0
step() { echo "-- mqtt: $*" >&2; }
fail() { echo "FAIL mqtt: $*" >&2; failed=1; }

step "examples/mqtt_bot.lua over WebSocket and TCP"
for url in "$MQTT_WS_URL" "$MQTT_TCP_URL"; do
    out=$("$MW" run examples/mqtt_bot.lua "$url" 2>"$dir/bot.err")
    expected=$'subscribed to moonwire/bot/chat/+ at QoS 2\nmoonwire/bot/chat/hello\thello at QoS 0\tqos 0\nmoonwire/bot/chat/ack\tacknowledged at QoS 1\tqos 1\nmoonwire/bot/chat/once\texactly once at QoS 2\tqos 2\nmoonwire/bot/chat/reply\tpong to ping\nretained: moonwire/bot/status\tonline\t(retain)\ndone'
    [ "$out" = "$expected" ] || { fail "mqtt_bot.lua $url printed:"; echo "$out" >&2; cat "$dir/bot.err" >&2; }
done

step "examples/mqtt_ws.lua (each packet that answered, one line each)"
out=$("$MW" run examples/mqtt_ws.lua "$MQTT_WS_URL" moonwire/ws 2>"$dir/ws.err")
expected=$'CONNACK\t0\nSUBACK\t1\nPUBLISH\tmoonwire/ws\thello at QoS 0\tqos 0\nPUBACK\t2\nPUBLISH\tmoonwire/ws\thello at QoS 1\tqos 1'
[ "$out" = "$expected" ] || { fail "mqtt_ws.lua printed:"; echo "$out" >&2; cat "$dir/ws.err" >&2; }

step "moonwire connect --protocol mqtt from a pipe, over WebSocket and TCP"
for url in "$MQTT_WS_URL" "$MQTT_TCP_URL"; do
    out=$(printf 'sub moonwire/hand/# 1\npub moonwire/hand/a hi\npub moonwire/hand/b "two words" 1\n' |
        "$MW" connect --protocol mqtt "$url" 2>"$dir/hand.err")
    status=$?
    expected=$'moonwire/hand/a hi\nmoonwire/hand/b two words  (qos 1)'
    [ $status -eq 0 ] && [ "$out" = "$expected" ] || { fail "connect --protocol mqtt $url exited $status, printed:"; echo "$out" >&2; cat "$dir/hand.err" >&2; }
done
# A retained message, seen by the next session, which then clears it (an empty retained payload).
printf 'pub moonwire/hand/kept "still here" 1 retain\n' | "$MW" connect --protocol mqtt "$MQTT_TCP_URL" 2>"$dir/hand.err" ||
    { fail "connect --protocol mqtt: pub retain exited $?"; cat "$dir/hand.err" >&2; }
printf 'sub moonwire/hand/kept\npub moonwire/hand/kept "" 0 retain\n' | "$MW" connect --protocol mqtt "$MQTT_TCP_URL" >"$dir/hand.out" 2>"$dir/hand.err"
[ "$(head -1 "$dir/hand.out")" = "moonwire/hand/kept still here  (retained)" ] || { fail "the retained message did not come back:"; cat "$dir/hand.out" "$dir/hand.err" >&2; }

step "examples/protocols/mqtt_test.lua"
"$MW" test examples/protocols/mqtt_test.lua || fail "mqtt_test.lua"

step "examples/protocols/mqtt_reconnect_test.lua (mosquitto stopped and started again)"
"$MW" test examples/protocols/mqtt_reconnect_test.lua --timeout 30 || fail "mqtt_reconnect_test.lua"

step "the broker stub (examples/mqtt_mock.lua) against mosquitto_sub and mosquitto_pub"
"$MW" run examples/mqtt_mock.lua "tcp://127.0.0.1:$mock_port" >"$dir/mock.out" 2>"$dir/mock.err" &
mock_pid=$!
wait_port "$mock_port" || fail "the broker stub did not start"
mosquitto_pub -h 127.0.0.1 -p "$mock_port" -t mock/status -m up -r -q 1 || fail "mosquitto_pub (retained)"
# Two subscribers, one by wildcard at QoS 1, one exact at QoS 0; each exits after its count.
mosquitto_sub -h 127.0.0.1 -p "$mock_port" -t 'mock/#' -q 1 -v -C 3 -W 10 >"$dir/sub1.out" &
sub1=$!
mosquitto_sub -h 127.0.0.1 -p "$mock_port" -t 'mock/+/temp' -v -C 1 -W 10 >"$dir/sub2.out" &
sub2=$!
# Both have subscribed once the stub printed their SUBSCRIBEs: wait for those lines.
for _ in $(seq 200); do
    [ "$(grep -c '^subscribe' "$dir/mock.out")" -ge 2 ] && break
    sleep 0.05
done
mosquitto_pub -h 127.0.0.1 -p "$mock_port" -t mock/kitchen/temp -m 21.5 -q 1 || fail "mosquitto_pub QoS 1"
mosquitto_pub -h 127.0.0.1 -p "$mock_port" -t mock/door -m open || fail "mosquitto_pub QoS 0"
wait $sub1 || fail "mosquitto_sub mock/# ended with $?"
wait $sub2 || fail "mosquitto_sub mock/+/temp ended with $?"
sub1="" sub2=""
expected1=$'mock/status up\nmock/kitchen/temp 21.5\nmock/door open'
[ "$(cat "$dir/sub1.out")" = "$expected1" ] || { fail "mosquitto_sub mock/# got:"; cat "$dir/sub1.out" >&2; }
[ "$(cat "$dir/sub2.out")" = "mock/kitchen/temp 21.5" ] || { fail "mosquitto_sub mock/+/temp got:"; cat "$dir/sub2.out" >&2; }
kill "$mock_pid" 2>/dev/null; wait "$mock_pid" 2>/dev/null; mock_pid=""
grep -q "mock/kitchen/temp" "$dir/mock.out" || { fail "the stub did not log the publish"; cat "$dir/mock.out" "$dir/mock.err" >&2; }

[ $failed -eq 0 ] && echo "mqtt: all passed" >&2
exit $failed
