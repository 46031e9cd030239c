#!/usr/bin/env bash
# Two builds of moonwire on one machine, run for run: before and after a change.
#   BEFORE=DIR AFTER=DIR bench/ab.sh
# DIR is a release build directory holding moonwire and moonwire-bench (built with
# scripts/release_build.sh; for an old commit, in a `git worktree` of it). RUNS (3) pairs
# of full bench/run.sh runs, alternating before, after, before, ..., so that both builds
# see the same hours of the machine's load; PEERS (picows,floor,moonwire: the clients the
# targets compare moonwire with) and every other bench/run.sh knob pass through. Keeps
# each run in bench/results/$AB_NAME/{before,after}/run-K.{md,json} (AB_NAME: ab) and
# writes bench/results/$AB_NAME.md: every row's median on both sides and after ÷ before,
# turned so that above 1 is better (bench/lib/compare_runs.py).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BEFORE:?BEFORE=release build directory of the old code}" "${AFTER:?AFTER=release build directory of the new code}"
runs=${RUNS:-3}
out=bench/results/${AB_NAME:-ab}
export PEERS=${PEERS:-picows,floor,moonwire}
declare -A dirs=([before]=$BEFORE [after]=$AFTER)
for dir in "$BEFORE" "$AFTER"; do
    [ -x "$dir/moonwire" ] && [ -x "$dir/moonwire-bench" ] || { echo "ab: $dir has no moonwire and moonwire-bench" >&2; exit 2; }
done
for side in before after; do
    mkdir -p "$out/$side"
    rm -f "$out/$side"/run-*.json "$out/$side"/run-*.md
done
for k in $(seq 1 "$runs"); do
    for side in before after; do
        dir=${dirs[$side]}
        echo "ab: run $k of $runs, $side ($dir)" >&2
        MOONWIRE_BIN="$dir/moonwire" MOONWIRE_BENCH_BIN="$dir/moonwire-bench" bench/run.sh
        cp bench/results/latest.json "$out/$side/run-$k.json"
        cp bench/results/latest.md "$out/$side/run-$k.md"
    done
done
python3 bench/lib/compare_runs.py "$out/before" "$out/after" > "$out.md"
echo "ab: $out.md" >&2
