#!/usr/bin/env bash
# Where each message's time goes, per process, for moonwire's client and its peers:
#   bench/cpusplit.sh rtt 32                     rtt, 32-byte text messages
#   bench/cpusplit.sh pipelined 32               pipelined, 32-byte binary messages
#   PIN_CPU= bench/cpusplit.sh rtt 32            nothing pinned
# Each client (CLIENTS, default moonwire,picows,floor) runs against a fresh picows echo
# with N and 2N messages; the difference, divided by N, is per message: wall time, the
# client's and the server's user and system CPU, the time neither ran, and the context
# switches (bench/lib/cpusplit.py). Unlike bench/profile.sh's instruction counts, these
# are times: the machine's load moves them, so run it on a quiet machine, and compare
# rows of one run. Knobs: N (rtt 100 000, pipelined 1 000 000), REPEAT (3), PIN_CPU (1),
# MOONWIRE_BIN (release build), BENCH_VENV (the venv bench/run.sh creates).
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:-rtt}
size=${2:-32}
case $workload in
    rtt) n=${N:-100000} ;;
    pipelined) n=${N:-1000000} ;;
    *) echo "cpusplit: rtt or pipelined, not $workload" >&2; exit 2 ;;
esac
. bench/lib/rtt_clients.sh cpusplit
exec python3 bench/lib/cpusplit.py "$workload" "$size" "$n" "${CLIENTS:-moonwire,picows,floor}"
