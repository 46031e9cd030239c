#!/usr/bin/env bash
# A run spread over real engines (docs/scaling.md), each against a moonwire echo
# server on 127.0.0.1 started here:
#   slurm   a one-node Slurm cluster (munged, slurmctld, slurmd) started here and
#           stopped by PID: deploy/slurm/submit.sh's 4-task job array and its merge
#           job (afterok), a merge job with a failing threshold (exit 99), a shard
#           that fails (the merge never runs), and srun -n 4;
#   podman  the image (scripts/image.sh, Containerfile) and 4 containers from it;
#   kube    `podman kube play` of deploy/kubernetes/pod.yaml, the Job's pod spec.
# Each checks that the merged counts are exactly the sum of the shards' and that
# the merge applies the thresholds. The engines are installed here (apt: slurm-wlm
# munge podman runc); a part the machine refuses is skipped with the reason.
# usage: MOONWIRE_BIN=PATH scripts/cluster_tests.sh [slurm] [podman] [kube]
# The image is built from MOONWIRE_BIN (CI: the debug build; a release build here
# takes longer than the whole of this script); MOONWIRE_IMAGE_BIN picks another.
# MOONWIRE_CLUSTER_KEEP=1 keeps the scratch folder (logs, summaries) for a look.
# Prints "N passed, N failed, N skipped" and exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
: "${MOONWIRE_BIN:=$(swift build --show-bin-path)/moonwire}"
MOONWIRE_BIN="$(cd "$(dirname "$MOONWIRE_BIN")" && pwd)/$(basename "$MOONWIRE_BIN")"
export MOONWIRE="$MOONWIRE_BIN"
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(slurm podman kube)

# The engines, when missing.
need=()
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || need+=(munge)
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v jq >/dev/null 2>&1 || need+=(jq)
command -v envsubst >/dev/null 2>&1 || need+=(gettext-base)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "cluster: installing ${need[*]}" >&2
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"; } >/dev/null 2>&1 ||
        echo "cluster: could not install ${need[*]}" >&2
fi

work="$(mktemp -d /tmp/moonwire-cluster.XXXXXX)"
chmod 0755 "$work"
pids=()
podman_opts=(--root "$work/podman/storage" --runroot "$work/podman/run")
passed=0 failed=0 skipped=0 failures=()
cleanup() {
    if command -v podman >/dev/null 2>&1 && [ -d "$work/podman" ]; then
        podman "${podman_opts[@]}" pod rm -fa >/dev/null 2>&1
        podman "${podman_opts[@]}" rm -fa >/dev/null 2>&1
        podman "${podman_opts[@]}" volume rm -fa >/dev/null 2>&1
        podman "${podman_opts[@]}" rmi -fa >/dev/null 2>&1
    fi
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    done
    if [ "${MOONWIRE_CLUSTER_KEEP:-}" = 1 ]; then echo "cluster: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

fail() { echo "cluster: FAIL: $*" >&2; return 1; }
# skip REASON: this part cannot run on this machine (return 2).
reason=""
skip() { reason="$*"; return 2; }
# until SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds (a state
# the engines offer no event for); fails after SECONDS.
until_true() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.1
    done
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The target: moonwire's own echo server.
"$MOONWIRE_BIN" listen --echo ws://127.0.0.1:0 </dev/null >"$work/echo.log" 2>&1 &
pids+=($!)
until_true 20 grep -q "listening on ws://" "$work/echo.log" || { cat "$work/echo.log" >&2; echo "cluster: the echo server did not start" >&2; exit 1; }
target="$(grep -o 'ws://127.0.0.1:[0-9]*' "$work/echo.log" | head -1)/"
# 40 requests/s for 2 s, all shards together: 80 requests, 20 a shard.
rate=40 duration=2 total=80

# check_merge DIR SHARDS: the shards' files add up to merged.json exactly.
check_merge() {
    local dir="$1" n="$2" name files
    files=("$dir"/shard-*-of-"$n".json)
    [ ${#files[@]} -eq "$n" ] || fail "$dir: ${#files[@]} shard files, not $n" || return 1
    [ -f "$dir/merged.json" ] || fail "$dir: no merged.json" || return 1
    for name in iterations messages_out messages_in answers bytes_out; do
        local sum merged
        sum="$(jq -s "[.[].metrics[] | select(.name == \"$name\") | .value] | add" "${files[@]}")"
        merged="$(jq "[.metrics[] | select(.name == \"$name\") | .value] | add" "$dir/merged.json")"
        [ "$sum" = "$merged" ] || fail "$dir: $name: the shards add up to $sum, the merge says $merged" || return 1
    done
    local iterations
    iterations="$(jq '[.metrics[] | select(.name == "iterations") | .value] | add' "$dir/merged.json")"
    [ "$iterations" = "$total" ] || fail "$dir: $iterations iterations, not $total" || return 1
    [ "$(jq -c '[.shards[].index]' "$dir/merged.json")" = "$(jq -nc "[range(1; $n + 1)]")" ] || fail "$dir: shards $(jq -c .shards "$dir/merged.json")" || return 1
    [ "$(jq '.thresholds | length' "$dir/merged.json")" -ge 3 ] || fail "$dir: the merge has no thresholds" || return 1
    echo "cluster: $dir: $n shards, $iterations iterations, sums exact, started $(jq '(.startSpread * 1e5 | floor) / 100' "$dir/merged.json") ms apart" >&2
}

part_slurm() {
    command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1 || { skip "no slurm-wlm/munge (apt-get install failed)"; return; }
    local s="$work/slurm" host
    host="$(hostname -s)"
    mkdir -p "$s/state" "$s/spool"
    chown munge:munge "$s" 2>/dev/null || { skip "cannot give munged its folder (not root)"; return; }
    [ -r /etc/munge/munge.key ] || { skip "no /etc/munge/munge.key"; return; }
    # munged with a socket of its own, so that any other munged on the machine is left alone.
    runuser -u munge -- /usr/sbin/munged --socket="$s/munge.socket" --pid-file="$s/munged.pid" \
        --log-file="$s/munged.log" --seed-file="$s/munged.seed" || { skip "munged does not start: $(tail -1 "$s/munged.log" 2>/dev/null)"; return; }
    pids+=("$(cat "$s/munged.pid")")
    cat >"$s/slurm.conf" <<EOF
ClusterName=moonwire
SlurmctldHost=$host
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$s/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
StateSaveLocation=$s/state
SlurmdSpoolDir=$s/spool
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd.pid
SlurmctldLogFile=$s/slurmctld.log
SlurmdLogFile=$s/slurmd.log
NodeName=$host CPUs=4 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF="$s/slurm.conf"
    slurmctld -D -f "$SLURM_CONF" >"$s/slurmctld.out" 2>&1 &
    pids+=($!)
    slurmd -D -f "$SLURM_CONF" >"$s/slurmd.out" 2>&1 &
    pids+=($!)
    until_true 30 bash -c '[ "$(sinfo -h -o %T 2>/dev/null)" = idle ]' || { skip "the node never became idle: $(tail -2 "$s/slurmctld.log" "$s/slurmd.log" 2>/dev/null | tr '\n' ' ')"; return; }
    echo "cluster: slurm: one node idle" >&2

    # The array and its merge, thresholds from the script (mw.thresholds) checked on the whole.
    deploy/slurm/submit.sh --shards 4 --lead 8 "$s/run" examples/load_rate.lua "$target" $rate $duration 0.001 >"$s/submit.out" 2>&1 ||
        { cat "$s/submit.out" "$s/run"/*.log >&2; fail "slurm: submit.sh exited $?"; return 1; }
    check_merge "$s/run" 4 || return 1
    grep -q "pass  request_latency:p99 < 0.5" "$s/submit.out" || { cat "$s/submit.out" >&2; fail "slurm: the merge printed no passing thresholds"; return 1; }
    grep -q "shard 3/4" "$s/run/shard-2.log" || { cat "$s/run/shard-2.log" >&2; fail "slurm: task 2 was not shard 3/4"; return 1; }
    # The same merge job with a threshold that fails: the job's status is 99.
    local code=0
    sbatch --wait --output="$s/merge-fail.log" deploy/slurm/merge.sbatch "$s/run" --threshold 'iterations:count > 1000' >/dev/null 2>&1 || code=$?
    [ $code -eq 99 ] || { cat "$s/merge-fail.log" >&2; fail "slurm: a failing threshold: merge job exited $code, not 99"; return 1; }
    grep -q "FAIL  iterations:count > 1000" "$s/merge-fail.log" || { fail "slurm: the failing threshold is not reported"; return 1; }
    # A shard that fails: the merge is cancelled, the whole exits non-zero.
    code=0
    deploy/slurm/submit.sh --shards 2 --lead 1 "$s/broken" "$s/no-such-script.lua" >"$s/broken.out" 2>&1 || code=$?
    [ $code -ne 0 ] && grep -q "the merge did not run" "$s/broken.out" || { cat "$s/broken.out" >&2; fail "slurm: a failed shard: submit.sh exited $code"; return 1; }
    # srun -n 4: the shards from SLURM_PROCID of SLURM_NTASKS; one instant for all, from this shell.
    srun -n 4 "$MOONWIRE_BIN" run --start-at $(($(date +%s) + 4)) --summary-json "$s/srun/" examples/load_rate.lua "$target" $rate $duration 0.001 >"$s/srun.out" 2>&1 ||
        { cat "$s/srun.out" >&2; fail "slurm: srun -n 4 exited $?"; return 1; }
    "$MOONWIRE_BIN" metrics merge "$s/srun" -o "$s/srun/merged.json" >"$s/srun-merge.out" 2>&1 || { cat "$s/srun-merge.out" >&2; fail "slurm: srun merge"; return 1; }
    check_merge "$s/srun" 4
}

podman_ready=""
# The image, once: podman with runc and descriptor limits this machine allows.
podman_image() {
    [ -n "$podman_ready" ] && { reason="see podman above"; return "$podman_ready"; }
    podman_ready=2
    command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 || { skip "no podman/runc (apt-get install failed)"; return; }
    mkdir -p "$work/podman"
    cat >"$work/podman/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
EOF
    export CONTAINERS_CONF="$work/podman/containers.conf"
    podman "${podman_opts[@]}" info >"$work/podman/info.out" 2>&1 || { skip "podman info fails: $(tail -1 "$work/podman/info.out")"; return; }
    local out
    out="$(PODMAN_OPTS="${podman_opts[*]}" scripts/image.sh --binary "${MOONWIRE_IMAGE_BIN:-$MOONWIRE_BIN}" --tag localhost/moonwire:latest --engine podman 2>"$work/podman/image.err")" ||
        { fail "image.sh: $(tail -3 "$work/podman/image.err" | tr '\n' ' ')"; podman_ready=1; return 1; }
    echo "cluster: image $out" >&2
    local t0 t1
    t0="$(date +%s%N)"
    podman "${podman_opts[@]}" run --rm --network host localhost/moonwire:latest --version >"$work/podman/version.out" 2>&1 ||
        { skip "podman run refused: $(tail -2 "$work/podman/version.out" | tr '\n' ' ')"; return; }
    t1="$(date +%s%N)"
    echo "cluster: podman run --rm moonwire --version: $(((t1 - t0) / 1000000)) ms" >&2
    [ "$(podman "${podman_opts[@]}" image inspect --format '{{.Config.User}}' localhost/moonwire:latest)" = "10001:10001" ] ||
        { fail "the image does not run as 10001"; podman_ready=1; return 1; }
    podman_ready=0
}

part_podman() {
    local r
    podman_image || { r=$?; return $r; }
    local dir="$work/podman/results" start i
    mkdir -p "$dir" && chown 10001:10001 "$dir"
    start=$(($(date +%s) + 4))
    for i in 1 2 3 4; do
        podman "${podman_opts[@]}" run -d --name "shard-$i" --network host -e "MW_SHARD=$i/4" -e "MW_START_AT=$start" \
            -v "$dir:/results" -v "$root/examples:/scripts:ro" localhost/moonwire:latest \
            run --summary --summary-json /results/ /scripts/load_rate.lua "$target" $rate $duration 0.001 >/dev/null ||
            { fail "podman: shard $i did not start"; return 1; }
    done
    for i in 1 2 3 4; do
        code="$(podman "${podman_opts[@]}" wait "shard-$i")"
        [ "$code" = 0 ] || { podman "${podman_opts[@]}" logs "shard-$i" >&2; fail "podman: shard $i exited $code"; return 1; }
    done
    [ "$(stat -c %u "$dir/shard-1-of-4.json")" = 10001 ] || { fail "podman: the summary is not 10001's"; return 1; }
    podman "${podman_opts[@]}" run --rm -v "$dir:/results" localhost/moonwire:latest metrics merge /results -o /results/merged.json >"$work/podman/merge.out" 2>&1 ||
        { cat "$work/podman/merge.out" >&2; fail "podman: the merge exited non-zero"; return 1; }
    grep -q "pass  dropped:count == 0" "$work/podman/merge.out" || { cat "$work/podman/merge.out" >&2; fail "podman: no thresholds in the merge"; return 1; }
    check_merge "$dir" 4
}

part_kube() {
    local r
    podman_image || { r=$?; return $r; }
    local venv_python=/tmp/mwvenv/bin/python
    # The Pod's containers are the Job's, but for the shard and the metrics port.
    if [ -x "$venv_python" ]; then
        "$venv_python" - deploy/kubernetes/job.yaml deploy/kubernetes/pod.yaml <<'EOF' || { fail "kube: pod.yaml differs from job.yaml's pod"; return 1; }
import sys, yaml
whole = yaml.safe_load(open(sys.argv[1]))["spec"]
job = whole["template"]["spec"]
pod = yaml.safe_load(open(sys.argv[2]))["spec"]
def same(c):
    return (c["image"], [a for a in c["args"] if not a.startswith("--metrics-")], c["volumeMounts"],
            [e for e in c["env"] if e["name"] not in ("MW_SHARD", "MW_SHARDS")])
want = same(job["containers"][0])
assert len(pod["containers"]) == whole["completions"], (len(pod["containers"]), whole["completions"])
shards = [e["value"] for c in pod["containers"] for e in c["env"] if e["name"] == "MW_SHARD"]
assert shards == ["%d/%d" % (i, whole["completions"]) for i in range(1, whole["completions"] + 1)], shards
for c in pod["containers"]:
    assert same(c) == want, (c["name"], same(c), want)
assert pod["volumes"] == job["volumes"], (pod["volumes"], job["volumes"])
EOF
    fi
    local start
    start=$(($(date +%s) + 4))
    cat deploy/kubernetes/results.yaml deploy/kubernetes/pod.yaml |
        TARGET_URL="$target" MW_START_AT="$start" envsubst '$TARGET_URL $MW_START_AT' |
        sed -e 's/value: "2000"/value: "'$rate'"/' -e 's/value: "300"/value: "'$duration'"/' >"$work/pod.yaml"
    podman "${podman_opts[@]}" kube play --configmap deploy/kubernetes/script.yaml "$work/pod.yaml" >"$work/kube.out" 2>&1 ||
        { skip "podman kube play refused the pod: $(tail -2 "$work/kube.out" | tr '\n' ' ')"; return; }
    local i code
    for i in 1 2 3 4; do
        code="$(podman "${podman_opts[@]}" wait "moonwire-load-shard-$i")"
        [ "$code" = 0 ] || { podman "${podman_opts[@]}" logs "moonwire-load-shard-$i" >&2; fail "kube: shard $i exited $code"; return 1; }
    done
    podman "${podman_opts[@]}" run --rm -v moonwire-results:/results localhost/moonwire:latest metrics merge /results -o /results/merged.json >"$work/kube-merge.out" 2>&1 ||
        { cat "$work/kube-merge.out" >&2; fail "kube: the merge exited non-zero"; return 1; }
    grep -q "pass  missed_starts:count == 0" "$work/kube-merge.out" || { cat "$work/kube-merge.out" >&2; fail "kube: no thresholds in the merge"; return 1; }
    check_merge "$(podman "${podman_opts[@]}" volume inspect --format '{{.Mountpoint}}' moonwire-results)" 4 || return 1
    podman "${podman_opts[@]}" kube down "$work/pod.yaml" >/dev/null 2>&1
}

for part in "${parts[@]}"; do
    echo "== cluster: $part" >&2
    began=$SECONDS
    reason=""
    "part_$part"
    code=$?
    case $code in
        0) passed=$((passed + 1)); echo "cluster: $part passed ($((SECONDS - began)) s)" >&2 ;;
        2) skipped=$((skipped + 1)); echo "cluster: $part SKIPPED: $reason" >&2 ;;
        *) failed=$((failed + 1)); failures+=("$part") ;;
    esac
done
[ $failed -eq 0 ] || echo "cluster tests failed: ${failures[*]}" >&2
echo "cluster: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
