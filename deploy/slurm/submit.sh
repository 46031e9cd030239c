#!/usr/bin/env bash
# A moonwire run on a Slurm cluster: a job array of SHARDS tasks (shards.sbatch),
# every shard's load beginning at the same instant, LEAD seconds from now, then
# the merge (merge.sbatch) once they have all succeeded. Waits for the merge and
# exits with its status: 0 when every threshold holds on the whole run, 99 when
# one fails; any other when a shard or the merge failed (a failed shard cancels
# the merge).
#   deploy/slurm/submit.sh [--shards N] [--lead SECONDS] [--threshold EXPR]... RESULTS_DIR SCRIPT.lua [ARGS...]
# RESULTS_DIR gets shard-I-of-N.json, merged.json and each job's log (shard-I.log, merge.log).
# Options for sbatch itself (partition, account, time) go in SBATCH_* variables, such as SBATCH_PARTITION.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shards=4 lead=10 thresholds=()
while [ $# -gt 0 ]; do
    case "$1" in
        --shards) shards="$2"; shift 2 ;;
        --lead) lead="$2"; shift 2 ;;
        --threshold) thresholds+=(--threshold "$2"); shift 2 ;;
        -*) echo "submit.sh: unknown option '$1' (see the head of deploy/slurm/submit.sh)" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "usage: submit.sh [--shards N] [--lead SECONDS] [--threshold EXPR]... RESULTS_DIR SCRIPT.lua [ARGS...]" >&2; exit 2; }
results="$(mkdir -p "$1" && cd "$1" && pwd)"
shift
start=$(($(date +%s) + lead))
jobs="$(sbatch --parsable --array="0-$((shards - 1))" --output="$results/shard-%a.log" \
    --export="ALL,MW_START_AT=$start" "$here/shards.sbatch" "$results" "$@")"
jobs="${jobs%%;*}"
echo "submit.sh: shards: job array $jobs, $shards tasks, load from $(date -u -d "@$start" +%FT%TZ)" >&2
status=0
rm -f "$results/merge.log"
sbatch --parsable --wait --dependency="afterok:$jobs" --kill-on-invalid-dep=yes --output="$results/merge.log" \
    "$here/merge.sbatch" "$results" "${thresholds[@]}" >/dev/null || status=$?
# A merge cancelled for a failed shard never ran, and sbatch --wait may still say 0.
if [ ! -f "$results/merge.log" ]; then
    echo "submit.sh: the merge did not run: a shard failed (see $results/shard-*.log)" >&2
    exit 1
fi
cat "$results/merge.log"
exit "$status"
