#!/usr/bin/env python3
"""Summarises several full bench runs of one build (bench/series.sh): the targets in
every run, their median and range, and whether the median meets the target; then the
rtt/pipelined/fanout figures of every client per run, so that the runs' spread shows.

    python3 bench/lib/series.py RUN1.json RUN2.json ... > bench/results/series.md

With an odd number of runs the median meets a threshold exactly when most runs do,
which is how "met" is decided here (the targets are all thresholds)."""
import json
import statistics
import sys

import driver


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt(v, digits=2):
    return "–" if v is None else f"{v:,.{digits}f}"


def digits_for(values):
    big = max((abs(v) for v in values if v is not None), default=0)
    return 0 if big >= 100 else 1 if big >= 10 else 2


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def spread(values):
    present = [v for v in values if v is not None]
    if not present:
        return None, None, None
    return statistics.median(present), min(present), max(present)


def where(meta):
    """Where the rtt/pipelined clients and servers ran (the driver's PIN_CPU; "1" unless set)."""
    return driver.where((meta.get("config") or {}).get("PIN_CPU", "1"))


def main(paths):
    runs = [load(p) for p in paths]
    n = len(runs)
    first = runs[0]["meta"]
    out = [f"# moonwire benchmarks — {n} full runs back to back", ""]
    out.append(f"- runs: {', '.join(r['meta'].get('date', '?') for r in runs)}")
    host = first.get("host") or {}
    if host:
        out.append(f"- host: {host.get('nproc')} CPUs ({host.get('cpu')}), kernel {host.get('kernel')}, nofile {host.get('nofile')}")
    for key in ("commit", "bin", "peer_versions"):
        if key in first:
            out.append(f"- {key}: {first[key]}")
    # The build is the binary file (path and modification time); the commit is the work
    # tree's at each run, which can move on while one binary is measured.
    builds = {(r["meta"].get("bin"), r["meta"].get("bin_mtime")) for r in runs}
    out.append(f"- same build in every run: {'yes' if len(builds) == 1 else 'no: ' + ', '.join(map(str, builds))}")
    commits = list(dict.fromkeys(r["meta"].get("commit") for r in runs))
    if len(commits) > 1:
        out.append(f"- the tree's commit at each run: {', '.join(r['meta'].get('commit') or '?' for r in runs)}")
    out += ["", "## Targets", "",
            f"Each run's value, the median of the {n} and their range; *met* is decided on the median.", ""]
    rows = []
    for i, target in enumerate(runs[0]["targets"]):
        values = [r["targets"][i]["value"] if i < len(r["targets"]) else None for r in runs]
        mets = [r["targets"][i]["met"] if i < len(r["targets"]) else None for r in runs]
        if all(v is None for v in values):
            continue
        med, lo, hi = spread(values)
        d = digits_for(values)
        known = [m for m in mets if m is not None]
        met = sum(1 for m in known if m) * 2 > len(known)
        rows.append([target["target"], *(fmt(v, d) for v in values), fmt(med, d),
                     f"{fmt(lo, d)}–{fmt(hi, d)}", "met" if met else "**missed**"])
    out.append(table(["target", *(f"run {k + 1}" for k in range(n)), "median", "range", "met"], rows))

    echo = {}
    for k, r in enumerate(runs):
        for row in r.get("summary", {}).get("echo", []):
            key = (row["workload"], row["size"], row["peer"], row["server"])
            echo.setdefault(key, [None] * n)[k] = row.get("msgs_per_s")
    if echo:
        out += ["", "## rtt and pipelined: msgs/s per run", "",
                f"Against the picows echo unless the server column says otherwise; {where(first)}.", ""]
        rows = []
        for (workload, size, peer, server), values in sorted(echo.items(), key=lambda kv: (kv[0][0] != "rtt", kv[0][1], kv[0][3], kv[0][2])):
            med, lo, hi = spread(values)
            base = echo.get((workload, size, "picows", "picows"))
            ratio = None
            if base and med:
                bmed = spread(base)[0]
                ratio = med / bmed if bmed else None
            rows.append([workload, f"{size} B" if size < 1024 else f"{size // 1024} KiB", peer, server,
                         *(fmt(v, 0) for v in values), fmt(med, 0),
                         f"{(hi - lo) / med * 100:.0f} %" if med else "–", fmt(ratio, 2) + "×" if ratio else "–"])
        out.append(table(["workload", "size", "client", "server", *(f"run {k + 1}" for k in range(n)),
                          "median", "range", "÷ picows client"], rows))

    fan = {}
    for k, r in enumerate(runs):
        for row in r.get("summary", {}).get("fanout", []):
            key = (row.get("conns"), row.get("peer"))
            fan.setdefault(key, [None] * n)[k] = row.get("spread_p99_ms_max")
    if fan:
        out += ["", "## fanout: spread p99 (worst tick, ms) per run", ""]
        rows = []
        for (conns, peer), values in sorted(fan.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] or "")):
            med, lo, hi = spread(values)
            rows.append([f"{conns:,}", peer, *(fmt(v, 1) for v in values), fmt(med, 1), f"{fmt(lo, 1)}–{fmt(hi, 1)}"])
        out.append(table(["connections", "client", *(f"run {k + 1}" for k in range(n)), "median", "range"], rows))
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: series.py RUN.json [RUN.json ...]")
    main(sys.argv[1:])
