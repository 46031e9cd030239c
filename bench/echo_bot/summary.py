#!/usr/bin/env python3
"""The echo bot benchmark's tables (bench/echo_bot/run.sh):

    summary.py RUNS.jsonl OUT [--meta key=value ...]

writes OUT.md (one table per placement and mode: medians over the runs, and
moonwire's msgs/s over each bot's in the same run) and OUT.json (the metadata and
every run as the load generator reported it)."""
import json
import os
import statistics
import sys
import time


def median(xs):
    return statistics.median(xs) if xs else None


def fmt(x, digits=0):
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def main():
    src, out = sys.argv[1], sys.argv[2]
    meta = {}
    args = sys.argv[3:]
    while args:
        if args[0] == "--meta":
            k, _, v = args[1].partition("=")
            meta[k] = v
            args = args[2:]
        else:
            sys.exit("summary.py: unknown argument " + args[0])
    runs = [json.loads(line) for line in open(src) if line.strip()]
    meta["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cpu = "?"
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    meta["host"] = f"{os.cpu_count()} CPUs ({cpu}), kernel {os.uname().release}"
    loads = [float(r["loadavg"].split()[0]) for r in runs if r.get("loadavg")]

    lines = ["# The echo bot: moonwire (protobuf codec) vs picows + protobuf (upb) vs node ws + JSON", ""]
    lines += [f"- date: {meta['date']}; host: {meta['host']}",
              f"- moonwire: commit `{meta.get('commit', '?')}`, binary `{meta.get('binary', '?')}`",
              f"- peers: {meta.get('peers', '?')}",
              f"- command: `{meta.get('command', '?')}`; duration {meta.get('duration_s', '?')} s",
              f"- machine load (1/5/15-minute load average): before {meta.get('load_before', '?')}, "
              f"after {meta.get('load_after', '?')}; 1-minute average during the runs "
              + (f"{min(loads):.1f}–{max(loads):.1f}" if loads else "?"),
              f"- message: echo.Envelope of bench/echo_bot/echo.proto, {meta.get('pb_bytes', '?')} B as protobuf "
              f"(moonwire, picows), {meta.get('json_bytes', '?')} B as JSON (node); the bot adds 1 to `hops`; "
              "every reply checked byte for byte by the load generator (bench/echo_bot/loadgen.c)",
              "- msgs/s and latency from the load generator (send of a message → receipt of its reply); "
              "bot CPU = the bot process's user + system time over the timed messages (/proc/PID/stat), per message",
              "- moonwire ÷ bot: moonwire's msgs/s over that bot's in the same run: median and range over the runs; "
              "bot CPU ÷ moonwire's: that bot's CPU per message over moonwire's, same run",
              "- moonwire-json: the same moonwire bot with codec = \"json\" on node's JSON messages (its replies are "
              "checked for length, sequence number and `\"hops\":2`: a Lua table does not keep the keys' order)", ""]

    failed = [r for r in runs if not (r.get("result") or {}).get("ok")]
    if failed:
        lines += [f"**{len(failed)} run(s) failed:**", ""]
        for r in failed:
            lines.append(f"- {r['placement']} run {r['run']} {r['mode']} {r['bot']}: "
                         f"{(r.get('result') or {}).get('error', 'no result')}")
        lines.append("")

    verdict = []
    for placement in dict.fromkeys(r["placement"] for r in runs):
        for mode in dict.fromkeys(r["mode"] for r in runs):
            sel = [r for r in runs if r["placement"] == placement and r["mode"] == mode and (r.get("result") or {}).get("ok")]
            if not sel:
                continue
            res0 = sel[0]["result"]
            what = (f"{res0['window']} in flight, n = {res0['n']:,}" if mode == "window"
                    else f"one at a time (window 1), n = {res0['n']:,}")
            where = "load generator on CPU 0, bot on CPU 1" if placement == "pinned" else "nothing pinned"
            lines += [f"## {mode}, {placement}: {what}; {where}", "",
                      "| bot | msgs/s | range % | p50 µs | p99 µs | bot CPU µs/msg | load gen CPU µs/msg "
                      "| moonwire ÷ bot (msgs/s) | bot CPU ÷ moonwire's |",
                      "|---|---|---|---|---|---|---|---|---|"]
            bots = list(dict.fromkeys(r["bot"] for r in sel))
            mw_by_run = {r["run"]: r["result"] for r in sel if r["bot"] == "moonwire"}
            for bot in bots:
                rs = [r for r in sel if r["bot"] == bot]
                rates = [r["result"]["msgs_per_s"] for r in rs]
                med = median(rates)
                rng = (max(rates) - min(rates)) / med * 100 if med else None
                p50 = median([r["result"]["p50_us"] for r in rs])
                p99 = median([r["result"]["p99_us"] for r in rs])
                bcpu = median([r["result"]["bot_cpu_us_per_msg"] for r in rs if r["result"]["bot_cpu_us_per_msg"] >= 0])
                scpu = median([r["result"]["server_cpu_us_per_msg"] for r in rs])
                ratio = cpu_ratio = "–"
                if bot != "moonwire" and mw_by_run:
                    rr = [mw_by_run[r["run"]]["msgs_per_s"] / r["result"]["msgs_per_s"] for r in rs if r["run"] in mw_by_run]
                    cr = [r["result"]["bot_cpu_us_per_msg"] / mw_by_run[r["run"]]["bot_cpu_us_per_msg"]
                          for r in rs if r["run"] in mw_by_run and mw_by_run[r["run"]]["bot_cpu_us_per_msg"] > 0]
                    if rr:
                        ratio = f"{median(rr):.2f}× ({min(rr):.2f}–{max(rr):.2f})"
                        if not bot.startswith("moonwire"):
                            verdict.append((placement, mode, bot, median(rr)))
                    if cr:
                        cpu_ratio = f"{median(cr):.2f}× ({min(cr):.2f}–{max(cr):.2f})"
                lines.append(f"| {bot} | {fmt(med)} | {fmt(rng)} | {fmt(p50, 1)} | {fmt(p99, 1)} | {fmt(bcpu, 2)} "
                             f"| {fmt(scpu, 2)} | {ratio} | {cpu_ratio} |")
            lines.append("")
    if verdict:
        lines += ["## moonwire ahead?", "", "| placement | mode | against | moonwire ÷ bot, median | ahead |",
                  "|---|---|---|---|---|"]
        for placement, mode, bot, r in verdict:
            lines.append(f"| {placement} | {mode} | {bot} | {r:.2f}× | {'yes' if r > 1 else 'no'} |")
        lines.append("")
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines))
    with open(out + ".json", "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1)
        f.write("\n")
    if failed:
        sys.exit(f"echo_bot: {len(failed)} run(s) failed (listed in {out}.md)")


if __name__ == "__main__":
    main()
