#!/usr/bin/env bash
# Runs a command with a deadline, so that a step of scripts/test.sh that hangs fails
# in words instead of running until CI gives up on it.
#
#   scripts/watchdog.sh SECONDS COMMAND [ARG...]
#
# A command still running after SECONDS is reported, then killed with everything it
# started, and the watchdog exits 124. The report names:
# - each process of the command, with the stacks of its threads that run moonwire's
#   code or wait (gdb, when installed);
# - the processes outside it that hold its output open (a child that outlived it);
# - with WATCHDOG_EVENTS=FILE, a Swift Testing event stream (--event-stream-output-path
#   FILE --event-stream-version 0), the tests that started and did not end.
# Otherwise the command's exit status is the watchdog's.
set -uo pipefail

limit=$1
shift

set -m                      # the command gets a process group of its own
"$@" &
pid=$!
set +m
trap 'kill -KILL -- "-$pid" 2>/dev/null' INT TERM

fired="$(mktemp)"
report() {
    echo "watchdog: '$*' still ran after ${limit} s; what it was doing:"
    members=$(ps -e -o pgid=,pid= | awk -v g="$pid" '$1 == g {print $2}')
    ps -o pid,etimes,stat,args --forest -p "$(echo $members | tr ' ' ,)" 2>/dev/null | cut -c1-200
    # Processes outside the command that hold its output (not the shells waiting for it).
    out=$(readlink "/proc/$pid/fd/1" 2>/dev/null)
    err=$(readlink "/proc/$pid/fd/2" 2>/dev/null)
    waiting=" "
    p=$$
    while [ "${p:-0}" -gt 1 ]; do
        waiting+="$p "
        p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
    done
    for proc in /proc/[0-9]*; do
        p=${proc#/proc/}
        [[ " $(echo $members) " == *" $p "* ]] && continue
        [[ "$waiting" == *" $p "* ]] && continue
        [ "$p" = "$BASHPID" ] && continue
        parent=$(awk '{print $4}' "$proc/stat" 2>/dev/null)
        [ "$parent" = "$$" ] || [ "$parent" = "$BASHPID" ] && continue
        for fd in 1 2; do
            target=$(readlink "$proc/fd/$fd" 2>/dev/null) || continue
            if [ -n "$target" ] && { [ "$target" = "$out" ] || [ "$target" = "$err" ]; }; then
                echo "holds its output open: $p $(tr '\0' ' ' < "$proc/cmdline" | cut -c1-160)"
                break
            fi
        done
    done
    if command -v gdb >/dev/null 2>&1; then
        for p in $members; do
            echo "-- stacks of $p ($(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-80))"
            # Only the threads with moonwire's frames (or the tests'), each cut short.
            timeout 60 gdb -p "$p" -batch -ex 'thread apply all bt 25' 2>/dev/null \
                | awk '/^Thread /{if (keep) printf "%s", block; block=$0 "\n"; keep=0; next}
                       /^#/{block=block $0 "\n"; if (/[Mm]oonwire|Tests|lua_/) keep=1}
                       END{if (keep) printf "%s", block}' | cut -c1-220
        done
    fi
    if [ -n "${WATCHDOG_EVENTS:-}" ] && [ -f "$WATCHDOG_EVENTS" ]; then
        echo "-- tests that started and did not end:"
        python3 - "$WATCHDOG_EVENTS" <<'EOF'
import json, sys
open_tests = {}
for line in open(sys.argv[1], errors="replace"):
    try:
        record = json.loads(line)
    except ValueError:
        continue
    if record.get("kind") != "event":
        continue
    event = record["payload"]
    kind, test = event.get("kind"), event.get("testID")
    if kind == "testStarted":
        open_tests[test] = event["messages"][0]["text"] if event.get("messages") else test
    elif kind == "testEnded":
        open_tests.pop(test, None)
for test, text in open_tests.items():
    print(f"   {text} ({test})")
EOF
    fi
}

(
    sleep "$limit" & wait $!
    if kill -0 "$pid" 2>/dev/null; then
        echo fired > "$fired"
        report "$@" >&2
        kill -KILL -- "-$pid" 2>/dev/null
    fi
) &
dog=$!

wait "$pid"
status=$?
kill "$dog" 2>/dev/null
pkill -P "$dog" sleep 2>/dev/null
wait "$dog" 2>/dev/null
if [ -s "$fired" ]; then
    rm -f "$fired"
    echo "watchdog: killed '$*' after ${limit} s" >&2
    exit 124
fi
rm -f "$fired"
exit "$status"
