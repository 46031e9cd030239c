#!/usr/bin/env bash
# Several full benchmark runs back to back on one build, and their summary:
#   bench/series.sh                 three runs of bench/run.sh (RUNS=N for another count)
#   PIN_CPU= SERIES_NAME=series-unpinned bench/series.sh    the same, nothing pinned
# Builds once (unless MOONWIRE_BIN is set), keeps every run's tables in
# bench/results/$SERIES_NAME/run-K.{md,json} and writes bench/results/$SERIES_NAME.md
# (SERIES_NAME: series unless set): each target
# per run, the median, the range and whether the median meets it, and every client's
# figures per run. bench/results/latest.* end up as the last run's.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
if [ -z "${MOONWIRE_BIN:-}" ]; then
    scripts/release_build.sh --product moonwire >&2
    scripts/release_build.sh --product moonwire-bench >&2
    bin_dir=$(scripts/release_build.sh --show-bin-path)
    export MOONWIRE_BIN="$bin_dir/moonwire" MOONWIRE_BENCH_BIN="$bin_dir/moonwire-bench"
fi
name=${SERIES_NAME:-series}
out=bench/results/$name
mkdir -p "$out"
rm -f "$out"/run-*.json "$out"/run-*.md
for k in $(seq 1 "$runs"); do
    echo "series: run $k of $runs" >&2
    bench/run.sh
    cp bench/results/latest.json "$out/run-$k.json"
    cp bench/results/latest.md "$out/run-$k.md"
done
python3 bench/lib/series.py $(for k in $(seq 1 "$runs"); do echo "$out/run-$k.json"; done) > "bench/results/$name.md"
echo "series: bench/results/$name.md" >&2
