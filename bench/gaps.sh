#!/usr/bin/env bash
# The client's own time between its system calls, per round trip: rtt, 32-byte text,
# each client against a fresh picows echo, client and server on one CPU:
#   bench/gaps.sh                                  moonwire, picows, floor; 30 000 round trips
#   CLIENTS=moonwire,picows N=50000 bench/gaps.sh
# perf, running on another CPU, records every system call's entry and exit and every
# context switch on that CPU (the raw_syscalls and sched_switch tracepoints);
# bench/lib/gaps.py adds up, for the client's busiest thread, the time it ran in user
# space from one system call's exit to the next one's entry (time switched out is not
# counted), by the pair of calls. That is what the client's own code costs per message,
# in time, which instruction counts (bench/profile.sh) do not show: cache misses after
# the server ran on the same CPU are in it. Each figure also holds the two tracepoints'
# own cost, the same for every client: the floor's recvfrom -> sendto, which runs
# almost nothing, shows how much. Times: run it on a quiet machine, compare rows of
# one run. Needs perf, two CPUs and the venv bench/run.sh creates.
# Knobs: CLIENTS, N, PIN_CPU (1), PERF_CPU (0), MOONWIRE_BIN (release build), BENCH_VENV.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "gaps: needs perf (apt: linux-perf)" >&2; exit 2; }
. bench/lib/rtt_clients.sh gaps
exec python3 bench/lib/gaps.py "${N:-30000}" "${CLIENTS:-moonwire,picows,floor}"
