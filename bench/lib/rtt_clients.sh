# Sourced by bench/cpusplit.sh and bench/gaps.sh (from the repository's root), which run
# one client at a time against a fresh picows echo (bench/lib/rtt_clients.py): checks the
# venv bench/run.sh creates, builds what is missing and exports BENCH_VENV, MOONWIRE_BIN
# (the release build unless set) and FLOOR_BIN. $1 names the calling script in errors.
export BENCH_VENV=${BENCH_VENV:-/tmp/moonwire-benchvenv}
if ! "$BENCH_VENV/bin/python" -c 'import picows, uvloop' 2>/dev/null; then
    echo "$1: no picows in $BENCH_VENV: run bench/run.sh once (QUICK=1 is enough), which creates it" >&2
    exit 2
fi
if [ -z "${MOONWIRE_BIN:-}" ]; then
    scripts/release_build.sh --product moonwire >&2
    MOONWIRE_BIN=$(scripts/release_build.sh --show-bin-path)/moonwire
fi
export MOONWIRE_BIN
. bench/lib/floor_build.sh
FLOOR_BIN=$(floor_build wsfloor)
export FLOOR_BIN
