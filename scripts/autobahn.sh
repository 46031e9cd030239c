#!/usr/bin/env bash
# Conformance: runs the Autobahn|Testsuite fuzzing server against moonwire's
# own Lua client (examples/autobahn_client.lua under `moonwire run`) and fails
# when any case FAILED. With --server it runs the suite's fuzzing client against
# moonwire's echo server (examples/autobahn_server.lua, permessage-deflate
# accepted) and fails when any case is not OK or INFORMATIONAL.
#
#   scripts/autobahn.sh                   # CI set: groups 1-7 and 10, no compression (~10 s)
#   scripts/autobahn.sh --server          # server CI set: 1-7, 9.1, 12.1
#   scripts/autobahn.sh --server --all    # server, every case (12.*, 13.* compressed)
#   scripts/autobahn.sh --all             # groups 1-10, then 12-13 with compress (~20 min)
#   scripts/autobahn.sh --cases '5.*,6.4.*'            # a selection
#   scripts/autobahn.sh --cases '12.1.*' --compress    # a selection, compressed
#   scripts/autobahn.sh --all --markdown /tmp/table.md # also write the table as markdown
#
# Options:
#   --server           test moonwire's server (the suite is the client)
#   --all              the full run (see above)
#   --cases LIST       comma-separated case patterns; 12.* and 13.* patterns run
#                      in a second, compressed client run
#   --compress         run every selected case with compress
#   --markdown FILE    write the per-group table (and versions, timings) to FILE
#   --out DIR          where the reports go (default: $PREFIX/runs/<time>-<pid>)
#   --port N           the fuzzing server's port (default: a free loopback port)
#   --timeout SECS     bound for one client run (default: 600 for the CI sets, 2400 otherwise,
#                      7200 for --server --all: the suite's client is slow at 12.* and 13.*)
#   --prefix DIR       where the suite is installed (default: $MOONWIRE_AUTOBAHN_PREFIX
#                      or /tmp/moonwire-autobahn)
#   --bin PATH         the moonwire binary (default: $MOONWIRE_BIN, else build with
#                      `swift build` and use $(swift build --show-bin-path)/moonwire)
#
# The suite (autobahntestsuite 0.8.2, Python 2) is installed on first use with
# pyenv's Python 2.7.18 (override with PY27=/path/to/python2.7) and the pins in
# scripts/autobahn/requirements.txt. Exit status: 0 when no case FAILED; 1 when
# a case FAILED, the client crashed or timed out, or a report is missing; 2 on
# bad usage or a broken setup.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
here="$root/scripts/autobahn"
cd "$root"

prefix="${MOONWIRE_AUTOBAHN_PREFIX:-/tmp/moonwire-autobahn}"
py27="${PY27:-$HOME/.pyenv/versions/2.7.18/bin/python}"
agent=moonwire
mode=ci cases="" server=0 force_compress=0 markdown="" out="" port="" timeout="" bin="${MOONWIRE_BIN:-}"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "autobahn: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --all) mode=all; shift ;;
        --server) server=1; shift ;;
        --cases) [ $# -ge 2 ] || die "--cases needs a list"; mode=cases; cases="$2"; shift 2 ;;
        --compress) force_compress=1; shift ;;
        --markdown) [ $# -ge 2 ] || die "--markdown needs a file"; markdown="$2"; shift 2 ;;
        --out) [ $# -ge 2 ] || die "--out needs a directory"; out="$2"; shift 2 ;;
        --port) [ $# -ge 2 ] || die "--port needs a number"; port="$2"; shift 2 ;;
        --timeout) [ $# -ge 2 ] || die "--timeout needs seconds"; timeout="$2"; shift 2 ;;
        --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix="$2"; shift 2 ;;
        --bin) [ $# -ge 2 ] || die "--bin needs a path"; bin="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
case "$markdown" in ""|/*) ;; *) markdown="$PWD/$markdown" ;; esac

# --- the runs: "label|compress|pattern,pattern..." -------------------------
runs=()
if [ $server = 1 ]; then
    # One run: the suite's client offers permessage-deflate in 12.* and 13.* only,
    # and the server accepts it whenever offered.
    case $mode in
        ci)    runs+=("server: 1-7, 9.1, 12.1|1|1.*,2.*,3.*,4.*,5.*,6.*,7.*,9.1.*,12.1.*") ;;
        all)   runs+=("server: all cases|1|*") ;;
        cases) runs+=("server: $cases|1|${cases// /}") ;;
    esac
else
case $mode in
    ci)  runs+=("groups 1-7, 10|0|1.*,2.*,3.*,4.*,5.*,6.*,7.*,10.*") ;;
    all) runs+=("groups 1-10|0|1.*,2.*,3.*,4.*,5.*,6.*,7.*,9.*,10.*")
         runs+=("groups 12-13, compress|1|12.*,13.*") ;;
    cases)
        plain="" deflate=""
        IFS=',' read -r -a patterns <<<"$cases"
        for p in "${patterns[@]}"; do
            p="${p// /}"; [ -n "$p" ] || continue
            if [ $force_compress = 1 ] || [[ "$p" == 12.* || "$p" == 13.* ]]; then
                deflate+="${deflate:+,}$p"
            else
                plain+="${plain:+,}$p"
            fi
        done
        [ -n "$plain$deflate" ] || die "--cases: no pattern given"
        [ -z "$plain" ] || runs+=("cases $plain|0|$plain")
        [ -z "$deflate" ] || runs+=("cases $deflate, compress|1|$deflate")
        ;;
esac
fi
if [ $force_compress = 1 ] && [ $mode != cases ] && [ $server = 0 ]; then
    for i in "${!runs[@]}"; do IFS='|' read -r l _ c <<<"${runs[$i]}"; runs[$i]="$l, compress|1|$c"; done
fi
[ -n "$timeout" ] || { [ $mode = ci ] && timeout=600 || { [ $server = 1 ] && timeout=7200 || timeout=2400; }; }

# --- the suite ----------------------------------------------------------------
site="$prefix/lib/python2.7/site-packages"
suite_ok() { "$py27" -c "import site; site.addsitedir('$site'); import autobahntestsuite.wstest" >/dev/null 2>&1; }
install_suite() {
    [ -x "$py27" ] || die "no Python 2.7 at $py27 (pyenv install 2.7.18, or set PY27)"
    mkdir -p "$prefix"
    (
        # One installer at a time; the second finds the work done.
        command -v flock >/dev/null && { exec 9>"$prefix/.install.lock"; flock -w 600 9 || true; }
        suite_ok && exit 0
        echo "autobahn: installing autobahntestsuite 0.8.2 into $prefix" >&2
        timeout 900 "$py27" -m pip install -q --disable-pip-version-check --no-warn-script-location \
            --prefix "$prefix" -r "$here/requirements.txt" >"$prefix/install.log" 2>&1 \
            || { tail -20 "$prefix/install.log" >&2; exit 1; }
        suite_ok
    ) || die "installing the suite failed (log: $prefix/install.log)"
}
suite_ok || install_suite

# --- moonwire ---------------------------------------------------------------
if [ -z "$bin" ]; then
    echo "autobahn: swift build" >&2
    build_log="$(mktemp)"
    timeout 1800 swift build >"$build_log" 2>&1 || { tail -30 "$build_log" >&2; rm -f "$build_log"; die "swift build failed"; }
    rm -f "$build_log"
    bin="$(swift build --show-bin-path)/moonwire"
fi
[ -x "$bin" ] || die "no moonwire binary at $bin"
# What was measured: the tree as it is now, when the binary was just built.
revision="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
[ -z "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ] || revision+=", uncommitted changes"

# --- reports directory --------------------------------------------------------
if [ -z "$out" ]; then
    mkdir -p "$prefix/runs"
    # Keep the last few runs' reports; they are a few MB each.
    { ls -1dt "$prefix/runs"/*/ 2>/dev/null || true; } | tail -n +6 | xargs -r rm -rf
    out="$prefix/runs/$(date +%Y%m%d-%H%M%S)-$$"
fi
mkdir -p "$out"; out="$(cd "$out" && pwd)"

# --- the fuzzing server's lifetime --------------------------------------------
server_pid="" client_pid="" echo_pid=""
# Process groups: `timeout` puts itself and the client in one, setsid the server.
# Some runners hand their children a blocked SIGTERM, so SIGKILL follows when
# TERM is not enough.
stop_group() { # pid
    kill -TERM -- "-$1" 2>/dev/null || kill -TERM "$1" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$1" 2>/dev/null || kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
stop_client() { [ -z "$client_pid" ] || stop_group "$client_pid"; client_pid=""; }
stop_server() {
    [ -z "$server_pid" ] || stop_group "$server_pid"
    server_pid=""
}
stop_echo() { [ -z "$echo_pid" ] || stop_group "$echo_pid"; echo_pid=""; }
trap 'stop_client; stop_server; stop_echo' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wstest="import site, sys
site.addsitedir('$site')
sys.argv = ['wstest'] + sys.argv[1:]
from autobahntestsuite.wstest import run
run()"

# --- server mode: moonwire's echo server, the suite's fuzzing client ----------
start_echo() { # dir; sets echo_port
    local dir="$1"
    setsid "$bin" run examples/autobahn_server.lua 0 >"$dir/server.log" 2>&1 </dev/null &
    echo_pid=$!
    echo_port=""
    for _ in $(seq 1 300); do
        echo_port="$(sed -n 's/^READY \([0-9]*\).*/\1/p' "$dir/server.log" | head -1)"
        [ -z "$echo_port" ] || return 0
        kill -0 "$echo_pid" 2>/dev/null || break
        sleep 0.1
    done
    tail -20 "$dir/server.log" >&2
    die "the moonwire echo server did not come up"
}

run_server_mode() { # dir patterns; sets status
    local dir="$1" patterns="$2"
    start_echo "$dir"
    python3 - "$dir/fuzzingclient.json" "$echo_port" "$dir" "$patterns" "$agent" <<'EOF'
import json, sys
path, port, outdir, patterns, agent = sys.argv[1:]
with open(path, "w") as f:
    json.dump({"outdir": outdir, "servers": [{"agent": agent, "url": "ws://127.0.0.1:%s" % port}],
               "cases": [p for p in patterns.split(",") if p],
               "exclude-cases": [], "exclude-agent-cases": {}}, f, indent=2)
EOF
    echo "autobahn: [$label] fuzzing client against $bin run examples/autobahn_server.lua (port $echo_port)" >&2
    (cd "$dir" && exec timeout -k 10 "$timeout" "$py27" -W ignore -c "$wstest" -m fuzzingclient -s "$dir/fuzzingclient.json") \
        >"$dir/client.log" 2>&1 </dev/null &
    client_pid=$!
    set +e
    wait "$client_pid"
    status=$?
    set -e
    client_pid=""
    if ! kill -0 "$echo_pid" 2>/dev/null; then
        echo "autobahn: the moonwire server died (log: $dir/server.log)" >&2
        tail -5 "$dir/server.log" >&2
        [ $status != 0 ] || status=1
    fi
    stop_echo
}

start_server() { # dir port patterns
    local dir="$1" p="$2" patterns="$3"
    python3 - "$dir/fuzzingserver.json" "$p" "$dir" "$patterns" <<'EOF'
import json, sys
path, port, outdir, patterns = sys.argv[1:]
with open(path, "w") as f:
    json.dump({"url": "ws://127.0.0.1:%s" % port, "outdir": outdir,
               "cases": [p for p in patterns.split(",") if p],
               "exclude-cases": [], "exclude-agent-cases": {}}, f, indent=2)
EOF
    ! port_open "$p" || die "port $p is already taken"
    (cd "$dir" && exec setsid "$py27" -W ignore -c "$wstest" -m fuzzingserver -u 0 -s "$dir/fuzzingserver.json") >"$dir/fuzzingserver.log" 2>&1 </dev/null &
    server_pid=$!
    for _ in $(seq 1 150); do
        port_open "$p" && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.2
    done
    tail -20 "$dir/fuzzingserver.log" >&2
    die "the fuzzing server did not come up on port $p"
}

write_run_json() { # uses dir label compress seconds status agent patterns
    python3 - "$dir/run.json" "$label" "$compress" "$seconds" "$status" "$agent" "$patterns" <<'EOF'
import json, sys
path, label, compress, seconds, status, agent, patterns = sys.argv[1:]
with open(path, "w") as f:
    json.dump({"label": label, "compress": compress == "1", "seconds": int(seconds),
               "client_status": int(status), "agent": agent, "patterns": patterns}, f)
EOF
}

# --- one run per entry ---------------------------------------------------------
run_dirs=()
n=0
started_all=$(date +%s)
for entry in "${runs[@]}"; do
    IFS='|' read -r label compress patterns <<<"$entry"
    n=$((n + 1))
    dir="$out/run$n"; rm -rf "$dir"; mkdir -p "$dir"; run_dirs+=("$dir")
    if [ $server = 1 ]; then
        t0=$(date +%s)
        run_server_mode "$dir" "$patterns"
        seconds=$(( $(date +%s) - t0 ))
        echo "autobahn: [$label] fuzzing client exit $status after ${seconds}s" >&2
        [ $status = 0 ] || tail -5 "$dir/client.log" >&2
        write_run_json
        continue
    fi
    p="${port:-$(free_port)}"
    start_server "$dir" "$p" "$patterns"
    args=(run examples/autobahn_client.lua "ws://127.0.0.1:$p" "$agent")
    [ "$compress" = 1 ] && args+=(compress)
    echo "autobahn: [$label] $bin ${args[*]}" >&2
    t0=$(date +%s)
    # In the background and waited for, so that INT and TERM act at once.
    timeout -k 10 "$timeout" "$bin" "${args[@]}" >"$dir/client.log" 2>&1 </dev/null &
    client_pid=$!
    set +e
    wait "$client_pid"
    status=$?
    set -e
    client_pid=""
    seconds=$(( $(date +%s) - t0 ))
    # The server writes index.json while answering /updateReports; a client
    # that failed most likely never asked for it.
    waits=100; [ $status = 0 ] || waits=10
    for _ in $(seq 1 $waits); do [ -f "$dir/index.json" ] && break; sleep 0.2; done
    stop_server
    echo "autobahn: [$label] client exit $status after ${seconds}s" >&2
    [ $status = 0 ] || tail -5 "$dir/client.log" >&2
    write_run_json
done
total_seconds=$(( $(date +%s) - started_all ))

info=(
    --info "date=$(date -u +%Y-%m-%d)"
    --info "moonwire=$("$bin" --version 2>/dev/null || echo '?') ($revision, $(basename "$(dirname "$bin")") build)"
    --info "Swift=$(swift --version 2>/dev/null | sed -n 's/^.*Swift version \([^ ]*\).*$/\1/p' | head -1)"
    --info "suite=autobahntestsuite 0.8.2 (fuzzing server, Python $("$py27" -c 'import platform; print(platform.python_version())'))"
    --info "host=$(uname -sm), $(nproc) cores"
    --info "wall time=${total_seconds}s"
)
set +e
strict=(); [ $server = 0 ] || strict=(--strict)
python3 "$here/report.py" "${strict[@]}" ${markdown:+--markdown "$markdown"} "${info[@]}" "${run_dirs[@]}"
rc=$?
set -e
echo "autobahn: reports in $out (took ${total_seconds}s)" >&2
[ -z "$markdown" ] || echo "autobahn: table written to $markdown" >&2
exit $rc
