#!/usr/bin/env python3
"""Compares the full bench runs of two builds (bench/ab.sh): for every row, each side's
median over its runs, the runs' values, and after ÷ before turned so that above 1 is
better (msgs/s up, milliseconds, bytes and CPU down). Rows that set moonwire against
another client measured in the same run (ratio to picows, to the C floors) are the ones
that load moves least: both sides of such a ratio ran minutes apart, not hours.

    python3 bench/lib/compare_runs.py BEFORE_DIR AFTER_DIR > bench/results/ab.md

Each DIR holds run-K.json files written by bench/run.sh (bench/results/latest.json)."""
import glob
import json
import os
import statistics
import sys

HIGHER, LOWER = +1, -1


def rows(path):
    """The run's rows: name -> (value, HIGHER or LOWER is better)."""
    with open(path) as f:
        summary = json.load(f)["summary"]
    out = {}
    echo = {(r["workload"], r["size"], r["peer"], r["server"]): r.get("msgs_per_s") for r in summary.get("echo", [])}
    for (workload, size, peer, server), rate in echo.items():
        if peer in ("moonwire", "picows", "floor") and rate:
            out[f"{workload} {size} B {peer} → {server}, msgs/s"] = (rate, HIGHER)
        picows = echo.get((workload, size, "picows", "picows"))
        if peer == "moonwire" and server == "picows" and rate and picows:
            out[f"{workload} {size} B moonwire ÷ picows, same run"] = (rate / picows, HIGHER)
    for r in summary.get("drained", []):
        out[f"drained {r['size']} B, drained ÷ pipelined"] = (r.get("ratio"), HIGHER)
        out[f"drained {r['size']} B, msgs/s"] = (r.get("drained_msgs_per_s"), HIGHER)
    for r in summary.get("metrics", []):
        out["metrics, on ÷ off"] = (r.get("ratio"), HIGHER)
        out["metrics on, msgs/s"] = (r.get("on_msgs_per_s"), HIGHER)
    spread = {(r["clients"], r["client"]): r for r in summary.get("spread", [])}
    for (clients, client), r in spread.items():
        if r.get("spread_p99_ms") is None:
            continue
        out[f"broadcast {clients}, {client}, spread p99 ms"] = (r["spread_p99_ms"], LOWER)
        out[f"broadcast {clients}, {client}, spread p50 ms"] = (r["spread_p50_ms"], LOWER)
        floor = spread.get((clients, "floor (C)"), {}).get("spread_p99_ms")
        if client == "moonwire" and floor:
            out[f"broadcast {clients}, moonwire ÷ floor spread p99, same run"] = (r["spread_p99_ms"] / floor, LOWER)
    for r in summary.get("conns", []):
        out[f"conns {r['conns']}, KiB per connection"] = (r.get("kib_per_conn"), LOWER)
        out[f"conns {r['conns']}, idle CPU %"] = (r.get("idle_cpu_pct"), LOWER)
        out[f"conns {r['conns']}, connect s"] = (r.get("connect_s"), LOWER)
    fanout = {(r["conns"], r["peer"]): r.get("spread_p99_ms_max") for r in summary.get("fanout", [])}
    for (conns, peer), p99 in fanout.items():
        if peer in ("moonwire", "picows", "floor") and p99:
            out[f"fanout {conns}, {peer}, spread p99 ms"] = (p99, LOWER)
        floor = fanout.get((conns, "floor"))
        if peer == "moonwire" and p99 and floor:
            out[f"fanout {conns}, moonwire ÷ floor spread p99, same run"] = (p99 / floor, LOWER)
    for r in summary.get("dispatch", []):
        out["dispatch ns"] = (r.get("dispatch_ns"), LOWER)
    return {k: v for k, v in out.items() if v[0] is not None}


def side(directory):
    paths = sorted(glob.glob(os.path.join(directory, "run-*.json")))
    merged = {}
    for path in paths:
        for name, (value, better) in rows(path).items():
            merged.setdefault(name, ([], better))[0].append(value)
    metas = []
    for path in paths:
        with open(path) as f:
            metas.append(json.load(f)["meta"])
    return merged, metas


def fmt(v):
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:,.1f}" if abs(v) >= 10 else f"{v:.2f}"


def main():
    before, metas_b = side(sys.argv[1])
    after, metas_a = side(sys.argv[2])
    nb, na = len(metas_b), len(metas_a)
    print("# Two builds, run for run (bench/ab.sh)")
    print()
    for label, metas in (("before", metas_b), ("after", metas_a)):
        bins = sorted({f"{m.get('bin')} ({m.get('bin_mtime')})" for m in metas})
        print(f"- {label}: {', '.join(bins)}; runs {', '.join(str(m.get('date')) for m in metas)}")
    host = (metas_b or metas_a or [{}])[0].get("host") or {}
    if host:
        print(f"- host: {host.get('nproc')} CPUs ({host.get('cpu')}), kernel {host.get('kernel')}")
    print()
    print(f"| row | before: median ({nb} runs) | after: median ({na} runs) | after vs before |")
    print("|---|---|---|---|")
    for name in sorted(set(before) & set(after)):
        (b, better), (a, _) = before[name], after[name]
        mb, ma = statistics.median(b), statistics.median(a)
        ratio = ma / mb if better == HIGHER else mb / ma
        word = "better" if ratio >= 1 else "worse"
        print(f"| {name} | {fmt(mb)} ({', '.join(fmt(v) for v in b)}) | {fmt(ma)} ({', '.join(fmt(v) for v in a)}) | {ratio:.2f}× {word} |")


if __name__ == "__main__":
    main()
