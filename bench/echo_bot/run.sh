#!/usr/bin/env bash
# The echo bot benchmark: three bots doing the same work against one load generator.
#   bench/echo_bot/run.sh            # about 2 minutes (plus the build)
#   RUNS=5 PLACEMENTS=pinned bench/echo_bot/run.sh
# Each bot dials bench/echo_bot/loadgen.c (C, one connection), which sends the
# Envelope of echo.proto (361 bytes as protobuf, 697 as JSON) with a sequence number
# patched in; the bot decodes it, adds 1 to `hops`, encodes it and sends it back; the
# load generator checks every reply byte for byte and times it. The bots:
#   moonwire  bot.lua, codec = mw.protobuf.codec("echo.Envelope")
#   picows    bot_picows.py, picows 2.3.1 on uvloop + Python's protobuf (upb)
#   node      bot_node.js, Debian's node ws + the same message as JSON (JSON.parse/stringify)
#   moonwire-json  bot.lua with codec = "json" on node's JSON: moonwire on node's format (the
#             load generator checks its replies' length, sequence number and "hops":2, as
#             a Lua table does not keep the keys' order)
# Modes: `window` (WINDOW messages in flight, N of them) and `rtt` (one at a time, N_RTT).
# Placements: `pinned` (load generator on CPU 0, bot on CPU 1) and `unpinned`.
# Every (placement, run, mode) round runs every bot, starting with a different one each
# run. Writes bench/results/echo_bot.md (medians, ranges, moonwire's ratios per run) and
# bench/results/echo_bot.json (every run).
# Knobs: MOONWIRE_BIN (set: nothing is built), BENCH_VENV (/tmp/moonwire-benchvenv),
# RUNS (3), N (60000), N_RTT (10000), WINDOW (256), MODES (window,rtt),
# PLACEMENTS (pinned,unpinned), BOTS (moonwire,picows,node,moonwire-json), OUT (bench/results/echo_bot).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=bench/echo_bot
venv=${BENCH_VENV:-/tmp/moonwire-benchvenv}
runs=${RUNS:-3} n=${N:-60000} n_rtt=${N_RTT:-10000} window=${WINDOW:-256}
modes=${MODES:-window,rtt} placements=${PLACEMENTS:-pinned,unpinned} bots=${BOTS:-moonwire,picows,node,moonwire-json}
out=${OUT:-bench/results/echo_bot}

need=()
[ -f /usr/share/nodejs/ws/package.json ] || need+=(node-ws)
command -v node >/dev/null || need+=(nodejs)
command -v protoc >/dev/null || need+=(protobuf-compiler)
command -v cc >/dev/null || need+=(gcc)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
    sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need[@]}" >/dev/null
fi
if ! "$venv/bin/python" -c 'import picows, uvloop, google.protobuf' 2>/dev/null; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check picows==2.3.1 uvloop==0.23.0 protobuf==7.36.2
fi
if [ -z "${MOONWIRE_BIN:-}" ]; then
    scripts/release_build.sh --product moonwire >&2
    MOONWIRE_BIN="$(scripts/release_build.sh --show-bin-path)/moonwire"
fi
loadgen=.build/echo-bot/loadgen
if [ ! -x "$loadgen" ] || [ "$here/loadgen.c" -nt "$loadgen" ]; then
    mkdir -p .build/echo-bot
    cc -O2 -Wall -Wextra -o "$loadgen" "$here/loadgen.c" -lm
fi

export PYTHONDONTWRITEBYTECODE=1
work=$(mktemp -d)
bot_pid=
cleanup() {
    [ -n "$bot_pid" ] && kill "$bot_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
protoc -I "$here" --descriptor_set_out="$work/echo.desc" echo.proto
"$venv/bin/python" "$here/messages.py" "$work/echo.desc" "$work"
# shellcheck source=/dev/null
. "$work/layout.sh"   # PB_SEQ_AT, JSON_SEQ_AT, PB_BYTES, JSON_BYTES

# one BOT MODE PLACEMENT RUN: one load generator, one bot; appends the JSON line.
one() {
    local bot=$1 mode=$2 placement=$3 run=$4 lg=() cmd=() pin_lg=() pin_bot=()
    if [ "$placement" = pinned ]; then pin_lg=(taskset -c 0); pin_bot=(taskset -c 1); fi
    case $bot in
        node) lg=(--msg "$work/msg.json" --reply "$work/reply.json" --seq-at "$JSON_SEQ_AT" --seq-format decimal --kind text) ;;
        moonwire-json) lg=(--msg "$work/msg.json" --reply "$work/reply.json" --seq-at "$JSON_SEQ_AT" --seq-format decimal --kind text
                           --expect '"hops":2') ;;
        *) lg=(--msg "$work/msg.pb" --reply "$work/reply.pb" --seq-at "$PB_SEQ_AT" --kind binary) ;;
    esac
    if [ "$mode" = rtt ]; then lg+=(--n "$n_rtt" --window 1); else lg+=(--n "$n" --window "$window"); fi
    rm -f "$work/pid"
    coproc LG { exec "${pin_lg[@]}" "$loadgen" "${lg[@]}" --client-pid-file "$work/pid" --label "$bot"; }
    local lg_pid=$LG_PID ready port
    read -r ready port <&"${LG[0]}" || true
    [ "$ready" = READY ] || { echo "echo_bot: the load generator did not start" >&2; return 1; }
    local url=ws://127.0.0.1:$port/
    case $bot in
        moonwire) cmd=("$MOONWIRE_BIN" run "$here/bot.lua" "$url") ;;
        moonwire-json) cmd=("$MOONWIRE_BIN" run "$here/bot.lua" "$url" json) ;;
        picows) cmd=("$venv/bin/python" "$here/bot_picows.py" "$work/echo.desc" "$url") ;;
        node) cmd=(node "$here/bot_node.js" "$url") ;;
    esac
    "${pin_bot[@]}" "${cmd[@]}" 2>"$work/bot.err" &
    bot_pid=$!
    echo "$bot_pid" > "$work/pid.tmp" && mv "$work/pid.tmp" "$work/pid"
    local line
    line=$(cat <&"${LG[0]}")
    wait "$lg_pid" || true
    # the bot ends when the load generator closes; give it 5 s
    for _ in $(seq 50); do kill -0 "$bot_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$bot_pid" 2>/dev/null || true
    wait "$bot_pid" 2>/dev/null || true
    bot_pid=
    printf '{"bot": "%s", "mode": "%s", "placement": "%s", "run": %d, "loadavg": "%s", "result": %s}\n' \
        "$bot" "$mode" "$placement" "$run" "$(cut -d' ' -f1-3 /proc/loadavg)" "${line:-null}" >> "$work/runs.jsonl"
    case $line in
        *'"ok": true'*) echo "echo_bot: $placement run $run $mode $bot: $(echo "$line" | grep -o '"msgs_per_s": [0-9.]*')" >&2 ;;
        *) echo "echo_bot: $placement run $run $mode $bot FAILED: $line $(head -c 500 "$work/bot.err")" >&2 ;;
    esac
}

IFS=, read -r -a bot_list <<< "$bots"
IFS=, read -r -a mode_list <<< "$modes"
IFS=, read -r -a placement_list <<< "$placements"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%s)
for placement in "${placement_list[@]}"; do
    for run in $(seq 1 "$runs"); do
        for mode in "${mode_list[@]}"; do
            # a different bot starts each run, so a slow moment of the machine hits each
            k=$(( (run - 1) % ${#bot_list[@]} ))
            for i in "${!bot_list[@]}"; do
                one "${bot_list[$(( (i + k) % ${#bot_list[@]} ))]}" "$mode" "$placement" "$run"
            done
        done
    done
done
mkdir -p "$(dirname "$out")"
python3 "$here/summary.py" "$work/runs.jsonl" "$out" \
    --meta "commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')" \
    --meta "binary=$MOONWIRE_BIN" \
    --meta "command=RUNS=$runs N=$n N_RTT=$n_rtt WINDOW=$window MODES=$modes PLACEMENTS=$placements BOTS=$bots bench/echo_bot/run.sh" \
    --meta "load_before=$load_before" --meta "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" \
    --meta "duration_s=$(( $(date -u +%s) - started ))" \
    --meta "pb_bytes=$PB_BYTES" --meta "json_bytes=$JSON_BYTES" \
    --meta "peers=node $(node --version), ws $(node -p "require('/usr/share/nodejs/ws/package.json').version"), $("$venv/bin/python" -c 'import picows, uvloop, google.protobuf as p; from google.protobuf.internal import api_implementation as a; print("picows", picows.__version__, "uvloop", uvloop.__version__, "protobuf", p.__version__, "(" + a.Type() + ")")')"
echo "echo_bot: $out.md" >&2
