#!/usr/bin/env bash
# The report of a long run: a synthesized 1-hour --metrics-jsonl file (one
# snapshot a second, the built-in metrics plus mw.rate's, a 5 s stall at 7:00
# and a reconnect at 30:00) and a summary file; `moonwire report` writes the
# page, then headless Chromium opens it. Prints the file's size, the time
# moonwire takes to write it, and Chromium's: the page's own load-event time
# and the wall time of a screenshot (load, layout, paint) less that of an
# empty page (the browser's start-up).
#   bench/report_hour.sh [MOONWIRE_BIN [KEEP_DIR]]   (KEEP_DIR: keep the report and its screenshot)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-$(swift build --show-bin-path)/moonwire}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

python3 - "$dir" <<'PY'
import json, math, random, sys
d = sys.argv[1]
random.seed(1)
rate = 200.0
totals = {k: 0.0 for k in ["messages_in", "messages_out", "bytes_in", "bytes_out", "reconnects", "dropped", "refused", "errors", "iterations", "missed_starts"]}
hists = ["connect_time", "connect_dns", "connect_tcp", "connect_tls", "connect_handshake", "recover_time", "request_latency", "expect_latency", "ping_rtt", "iteration_duration", "iteration_duration_uncorrected"]
counts = {h: 0 for h in hists}
with open(f"{d}/run.jsonl", "w") as f:
    for t in range(1, 3601):
        stall = 420 <= t < 425
        n = 0 if stall else rate + random.gauss(0, 3)
        if t == 425: n = rate * 6
        for k in ["messages_in", "messages_out", "iterations"]: totals[k] += max(n, 0)
        totals["bytes_in"] += max(n, 0) * 32; totals["bytes_out"] += max(n, 0) * 32
        if t == 1800: totals["reconnects"] += 1; totals["errors"] += 1
        m = {k: {"count": v} for k, v in totals.items()}
        base = 0.010 + random.random() * 0.002
        lat = 5.0 if t == 425 else base
        for h in hists:
            entry = {"count": counts[h], "interval_count": 0}
            if h in ("request_latency", "iteration_duration", "iteration_duration_uncorrected") and n > 0:
                counts[h] += int(n)
                entry = {"count": counts[h], "p50": 0.0105, "p90": 0.0115, "p99": 0.019, "max": 5.0 if t >= 425 else 0.03,
                         "interval_count": int(n), "interval_p50": base, "interval_p90": base * 1.1, "interval_p99": lat * 0.98, "interval_max": lat}
            m[h] = entry
        m["connections_open"] = {"count": 0 if t == 1800 else 1, "max": 1}
        m["queue_depth"] = {"count": 0 if not stall else (t - 419) * 200, "max": 1000}
        m["buffered_bytes"] = {"count": 0 if not stall else (t - 419) * 6400, "max": 32000}
        m["in_flight"] = {"count": 2 if not stall else (t - 419) * 200, "max": 1000}
        line = {"metrics": m, "t": t + 0.001 * t}
        if t == 1:
            line["command"] = ["moonwire", "run", "--report", "r.html", "load.lua"]
            line["start"] = "2026-11-25T12:00:00Z"
        if t == 3600:
            line["end"] = True
            line["thresholds"] = ["request_latency:p99 < 0.05"]
        f.write(json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n")
def hdr(n, center):
    # Buckets as HdrHistogram keeps them at 3 digits: about 1 000 distinct values.
    out = {}
    for _ in range(20000):
        v = int(random.lognormvariate(math.log(center), 0.3))
        out[v] = out.get(v, 0) + 1
    scale = n / 20000
    return [[v, max(1, int(c * scale))] for v, c in sorted(out.items())]
metrics = [{"kind": "counter", "name": k, "tags": {}, "value": v} for k, v in totals.items()]
for h, center in [("request_latency", 10500), ("iteration_duration", 10600), ("connect_time", 2500), ("connect_dns", 300), ("connect_tcp", 900), ("connect_handshake", 800)]:
    metrics.append({"histogram": {"counts": hdr(max(counts.get(h, 1), 2), center), "digits": 3}, "kind": "histogram", "name": h, "tags": {}})
json.dump({"duration": 3603.6, "format": "moonwire-metrics", "metrics": metrics, "shards": [], "version": 1}, open(f"{d}/summary.json", "w"))
PY

start=$(date +%s.%N)
"$bin" report "$dir/run.jsonl" "$dir/summary.json" -o "$dir/report.html"
end=$(date +%s.%N)
jsonl_size=$(stat -c %s "$dir/run.jsonl")
size=$(stat -c %s "$dir/report.html")
echo "metrics file: $(wc -l < "$dir/run.jsonl") lines, $jsonl_size bytes"
echo "report: $size bytes ($(python3 -c "print(f'{$size/1048576:.2f}')") MiB), written in $(python3 -c "print(f'{$end-$start:.2f}')") s"

browser=(chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$dir/profile" --hide-scrollbars)
echo '<!doctype html><title>empty</title>' > "$dir/empty.html"
load_ms=$("${browser[@]}" --dump-dom "file://$dir/report.html" 2>/dev/null | grep -o 'data-load-ms="[0-9]*"' | grep -o '[0-9]*' || true)
echo "chromium: load event at ${load_ms:-?} ms after navigation start (the page's own measure)"
for run in 1 2 3; do
    a=$(date +%s.%N)
    "${browser[@]}" --screenshot="$dir/empty.png" --window-size=1280,2400 "file://$dir/empty.html" >/dev/null 2>&1
    b=$(date +%s.%N)
    "${browser[@]}" --screenshot="$dir/report.png" --window-size=1280,2400 "file://$dir/report.html" >/dev/null 2>&1
    c=$(date +%s.%N)
    python3 -c "e=$b-$a; r=$c-$b; print(f'chromium screenshot, run $run: empty page {e:.2f} s, report {r:.2f} s, difference {r-e:.2f} s')"
done
if [ -n "${2:-}" ]; then
    mkdir -p "$2" && cp "$dir/report.html" "$dir/report.png" "$2/"
fi
