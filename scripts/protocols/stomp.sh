#!/usr/bin/env bash
# moonwire.stomp against Debian's RabbitMQ with its STOMP and Web-STOMP plugins (the
# broker STOMP users most often meet, packaged by Debian with both plugins bundled):
# the bot example over WebSocket and TCP, examples/protocols/stomp_test.lua, then the
# reconnect test, which stops the broker by PID and starts it again on the same ports.
# RabbitMQ takes several seconds to start: it is started once (and once more by the
# reconnect test). Measured here on 2 busy cores (load 20): first start 24.5 s, restart
# 12.1 s, the tests 7 s: 44 s in all. usage: MOONWIRE_BIN=PATH scripts/protocols/stomp.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${MOONWIRE_BIN:?set MOONWIRE_BIN to the moonwire binary}"
[ "$(id -u)" -eq 0 ] || { echo "stomp.sh: run as root: RabbitMQ is started as the rabbitmq user" >&2; exit 1; }
WORK=$(mktemp -d /tmp/mw-stomp.XXXXXX)
epmd_before=$(pgrep -x epmd || true)
cleanup() {
    [ -s "$WORK/broker.pid" ] && kill -- -"$(cat "$WORK/broker.pid")" 2>/dev/null || true
    for _ in $(seq 50); do [ -s "$WORK/broker.pid" ] && kill -0 "$(cat "$WORK/broker.pid")" 2>/dev/null && sleep 0.1; done
    # RabbitMQ starts epmd when none runs; stop it only if it is ours.
    if [ -z "$epmd_before" ]; then epmd=$(pgrep -x epmd || true); [ -n "$epmd" ] && kill $epmd 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
AMQP_PORT=$(free_port) STOMP_PORT=$(free_port) WS_PORT=$(free_port) DIST_PORT=$(free_port)
cat >"$WORK/rabbitmq.conf" <<CONF
listeners.tcp.default = 127.0.0.1:$AMQP_PORT
stomp.listeners.tcp.1 = 127.0.0.1:$STOMP_PORT
web_stomp.tcp.port = $WS_PORT
web_stomp.tcp.ip = 127.0.0.1
loopback_users = none
CONF
echo '[rabbitmq_stomp,rabbitmq_web_stomp].' >"$WORK/enabled_plugins"
mkdir -p "$WORK/mnesia" "$WORK/log"
# rabbitmq-server runs as the rabbitmq user: it must own what it writes.
chown -R rabbitmq:rabbitmq "$WORK"
export RABBITMQ_CONFIG_FILE=$WORK/rabbitmq RABBITMQ_ENABLED_PLUGINS_FILE=$WORK/enabled_plugins \
    RABBITMQ_MNESIA_BASE=$WORK/mnesia RABBITMQ_LOG_BASE=$WORK/log RABBITMQ_NODENAME=mw_stomp_$$@localhost \
    RABBITMQ_NODE_PORT=$AMQP_PORT RABBITMQ_DIST_PORT=$DIST_PORT ERL_EPMD_ADDRESS=127.0.0.1

# start.sh waits until a broker it stopped is gone, then starts it again as the rabbitmq
# user (setpriv: no su in between, which would put the Erlang VM in a session of its own) in
# a process group of its own, whose leader writes its PID: stopping that group by this PID
# stops the VM and its wrapper script together.
cat >"$WORK/start.sh" <<START
old=\$(cat $WORK/broker.pid 2>/dev/null)
while [ -n "\$old" ] && kill -0 -- -"\$old" 2>/dev/null; do sleep 0.1; done
cd /var/lib/rabbitmq
HOME=/var/lib/rabbitmq setsid sh -c 'echo \$\$ >$WORK/broker.pid; exec setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups /usr/lib/rabbitmq/bin/rabbitmq-server' >>$WORK/broker.out 2>&1 </dev/null &
for _ in \$(seq 50); do [ -s $WORK/broker.pid ] && [ "\$(cat $WORK/broker.pid)" != "\$old" ] && break; sleep 0.1; done
START
export STOMP_BROKER_START="sh $WORK/start.sh >/dev/null 2>&1 &"
export STOMP_BROKER_STOP="kill -- -\$(cat $WORK/broker.pid)"
export STOMP_WS_URL="ws://127.0.0.1:$WS_PORT/ws" STOMP_TCP_URL="tcp://127.0.0.1:$STOMP_PORT"
export STOMP_PORTS="$WS_PORT $STOMP_PORT"
wait_for_ports() {
    for _ in $(seq 600); do
        (echo >/dev/tcp/127.0.0.1/"$WS_PORT") 2>/dev/null && (echo >/dev/tcp/127.0.0.1/"$STOMP_PORT") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "stomp.sh: RabbitMQ did not open ports $WS_PORT and $STOMP_PORT within 60 s:" >&2; tail -20 "$WORK/broker.out" >&2; return 1
}
# Seconds since $1 (a date +%s.%N), to one decimal.
since() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }'; }
started=$(date +%s.%N)
sh "$WORK/start.sh"
wait_for_ports
echo "stomp.sh: RabbitMQ up in $(since $started) s" >&2

echo "-- bot over Web-STOMP and over TCP" >&2
for url in "$STOMP_WS_URL" "$STOMP_TCP_URL"; do
    "$MOONWIRE_BIN" run examples/stomp_bot.lua "$url" 3 | tee "$WORK/bot.out"
    grep -q "^received 3 of 3" "$WORK/bot.out"
done

echo "-- moonwire connect --protocol stomp from a pipe, over Web-STOMP and over TCP" >&2
for url in "$STOMP_WS_URL" "$STOMP_TCP_URL"; do
    out=$(printf 'sub /queue/moonwire-hand\nsend /queue/moonwire-hand hello by hand\n' |
        "$MOONWIRE_BIN" connect --protocol stomp -o login=guest -o passcode=guest "$url")
    [ "$out" = "/queue/moonwire-hand hello by hand" ] || { echo "connect --protocol stomp $url printed:" >&2; echo "$out" >&2; exit 1; }
done

echo "-- tests against RabbitMQ" >&2
"$MOONWIRE_BIN" test examples/protocols/stomp_test.lua

echo "-- reconnect: RabbitMQ stopped by PID and started again" >&2
t=$(date +%s.%N)
"$MOONWIRE_BIN" test --timeout 90 examples/protocols/stomp_reconnect_test.lua
echo "stomp.sh: reconnect test took $(since $t) s" >&2
echo "stomp.sh: passed in $(since $started) s" >&2
