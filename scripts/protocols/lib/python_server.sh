# Sourced by the protocol scripts whose real server is a Python program in the venv
# (socketio.sh, graphql_ws.sh): the binary, the venv's python, a temporary folder,
# the PIDs to stop at exit, and wait_line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
: "${MOONWIRE_BIN:=$(swift build --show-bin-path)/moonwire}"
PY=$(bash Tests/MoonwireCoreTests/Peers/setup_venv.sh)
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

# wait_line FILE PATTERN: polls until FILE has a line matching PATTERN (10 s).
wait_line() {
    for _ in $(seq 200); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    echo "timed out waiting for '$2' in $1:" >&2; cat "$1" >&2; return 1
}
