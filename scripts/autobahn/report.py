#!/usr/bin/env python3
"""Reads the fuzzing server's reports of one or more runs of scripts/autobahn.sh
and says how moonwire did: counts per case group and outcome, the cases that
were not OK (with the suite's reason), a markdown table on request.

    report.py [--markdown FILE] [--info KEY=VALUE ...] RUNDIR...

Each RUNDIR holds what autobahn.sh left there: index.json (the server's
report), run.json (label, compress, seconds, client exit status) and
client.log. Exit status 1 when a case FAILED (with --strict: any case whose
outcome is not OK or INFORMATIONAL), a client exited non-zero, a report is
missing, or a report lacks cases the server announced."""
import argparse
import json
import os
import re
import sys

OUTCOMES = ["OK", "NON-STRICT", "INFORMATIONAL", "UNIMPLEMENTED", "FAILED"]
# The groups as the suite's own index names them.
GROUP_TITLES = {
    "1": "Framing", "2": "Pings/Pongs", "3": "Reserved bits", "4": "Opcodes",
    "5": "Fragmentation", "6": "UTF-8 handling", "7": "Close handling",
    "9": "Limits/performance", "10": "Misc", "12": "permessage-deflate (payloads)",
    "13": "permessage-deflate (parameters)",
}


def case_key(case_id):
    return tuple(int(p) if p.isdigit() else 0 for p in case_id.split("."))


def announced_count(log_path):
    """The number of cases the client was told (it logs "N cases")."""
    try:
        with open(log_path, errors="replace") as f:
            m = re.search(r"\b(\d+) cases\b", f.read())
        return int(m.group(1)) if m else None
    except OSError:
        return None


def reason(run_dir, entry):
    """The suite's own one-line explanation of a case's outcome."""
    name = entry.get("reportfile")
    if not name:
        return ""
    try:
        with open(os.path.join(run_dir, name)) as f:
            detail = json.load(f)
    except (OSError, ValueError):
        return ""
    text = detail.get("result", "") or ""
    close = detail.get("resultClose", "") or ""
    if entry.get("behaviorClose") not in (None, "OK", "INFORMATIONAL") and close:
        text = (text + " / close: " + close).strip(" /")
    return " ".join(text.split())


def load_run(run_dir):
    run = {"dir": run_dir, "problems": [], "cases": {}}
    try:
        with open(os.path.join(run_dir, "run.json")) as f:
            run.update(json.load(f))
    except (OSError, ValueError):
        run["problems"].append("no run.json in " + run_dir)
        run.setdefault("label", run_dir)
    if run.get("client_status", 0) != 0:
        status = run["client_status"]
        what = "timed out" if status in (124, 137) else "exited %d" % status
        run["problems"].append("the client %s (log: %s)" % (what, os.path.join(run_dir, "client.log")))
    index_path = os.path.join(run_dir, "index.json")
    try:
        with open(index_path) as f:
            index = json.load(f)
    except (OSError, ValueError):
        run["problems"].append("no report (%s): the client never reached /updateReports" % index_path)
        return run
    agent = run.get("agent")
    cases = index.get(agent) if agent else None
    if cases is None and len(index) == 1:
        cases = next(iter(index.values()))
    run["cases"] = cases or {}
    expected = announced_count(os.path.join(run_dir, "client.log"))
    if expected is not None and len(run["cases"]) < expected:
        run["problems"].append("the report has %d of the %d cases announced" % (len(run["cases"]), expected))
    if not run["cases"]:
        run["problems"].append("the report has no cases")
    return run


def tally(cases):
    groups = {}
    for cid, entry in cases.items():
        g = cid.split(".")[0]
        counts = groups.setdefault(g, {o: 0 for o in OUTCOMES})
        b = entry.get("behavior", "?")
        counts[b] = counts.get(b, 0) + 1
    return groups


def fmt_seconds(s):
    s = int(round(s))
    return "%dm%02ds" % (s // 60, s % 60) if s >= 60 else "%ds" % s


def main():
    p = argparse.ArgumentParser()
    p.add_argument("runs", nargs="+")
    p.add_argument("--markdown")
    p.add_argument("--info", action="append", default=[], help="KEY=VALUE for the markdown header")
    p.add_argument("--strict", action="store_true", help="NON-STRICT and UNIMPLEMENTED fail too")
    a = p.parse_args()

    runs = [load_run(d) for d in a.runs]
    failed_any = False
    rows = []  # (group, run label, counts)
    totals = {o: 0 for o in OUTCOMES}
    for run in runs:
        groups = tally(run["cases"])
        secs = run.get("seconds")
        print("== %s: %d cases%s, client exit %s" % (
            run.get("label"), len(run["cases"]),
            " in " + fmt_seconds(secs) if secs is not None else "", run.get("client_status", "?")))
        print("  %-6s %s" % ("group", " ".join("%13s" % o for o in OUTCOMES)))
        run_total = {o: 0 for o in OUTCOMES}
        for g in sorted(groups, key=lambda x: int(x) if x.isdigit() else 999):
            c = groups[g]
            print("  %-6s %s" % (g, " ".join("%13d" % c.get(o, 0) for o in OUTCOMES)))
            rows.append((g, run, c))
            for o in OUTCOMES:
                run_total[o] += c.get(o, 0)
                totals[o] += c.get(o, 0)
        print("  %-6s %s" % ("total", " ".join("%13d" % run_total[o] for o in OUTCOMES)))
        odd = sorted(set(b for e in run["cases"].values() for b in [e.get("behavior")] if b not in OUTCOMES))
        if odd:
            print("  other outcomes: " + ", ".join(map(str, odd)))
            failed_any = True
        for cid in sorted(run["cases"], key=case_key):
            entry = run["cases"][cid]
            b = entry.get("behavior")
            if b != "OK" or entry.get("behaviorClose") not in ("OK", "INFORMATIONAL"):
                print("  %-8s %-13s close %-13s %s" % (cid, b, entry.get("behaviorClose"), reason(run["dir"], entry)[:160]))
            if b == "FAILED" or (a.strict and b not in ("OK", "INFORMATIONAL")):
                failed_any = True
        for problem in run["problems"]:
            print("  PROBLEM: " + problem)
            failed_any = True
    if len(runs) > 1:
        n = sum(totals.values())
        print("== all runs: %d cases, " % n + ", ".join("%d %s" % (totals[o], o) for o in OUTCOMES))

    if a.markdown:
        write_markdown(a.markdown, runs, rows, totals, a.info)
    print("autobahn: " + ("FAILED" if failed_any else "no case FAILED"))
    return 1 if failed_any else 0


def write_markdown(path, runs, rows, totals, info):
    lines = []
    for item in info:
        k, _, v = item.partition("=")
        lines.append("- %s: %s" % (k, v))
    for run in runs:
        secs = run.get("seconds")
        lines.append("- run \"%s\": %d cases%s, client exit %s" % (
            run.get("label"), len(run["cases"]),
            " in " + fmt_seconds(secs) if secs is not None else "", run.get("client_status", "?")))
    lines.append("")
    lines.append("| group | tests | compression | " + " | ".join(OUTCOMES) + " |")
    lines.append("|---|---|---|" + "---:|" * len(OUTCOMES))
    for g, run, c in rows:
        lines.append("| %s | %s | %s | " % (g, GROUP_TITLES.get(g, ""), "yes" if run.get("compress") else "no")
                     + " | ".join(str(c.get(o, 0)) for o in OUTCOMES) + " |")
    lines.append("| **total** | | | " + " | ".join("**%d**" % totals[o] for o in OUTCOMES) + " |")
    notable = []
    for run in runs:
        for cid in sorted(run["cases"], key=case_key):
            e = run["cases"][cid]
            if e.get("behavior") != "OK":
                notable.append("- %s: %s — %s" % (cid, e.get("behavior"), reason(run["dir"], e)))
        for problem in run["problems"]:
            notable.append("- problem in \"%s\": %s" % (run.get("label"), problem))
    if notable:
        lines.append("")
        lines.append("Cases not OK:")
        lines.append("")
        lines.extend(notable)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
