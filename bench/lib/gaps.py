#!/usr/bin/env python3
"""bench/gaps.sh's driver: a client's time in user space between its system calls.

    python3 bench/lib/gaps.py N CLIENT,CLIENT...

Each client runs N rtt round trips (no warm-up, so that every traced one counts) against
a fresh picows echo, both on PIN_CPU (1), under `perf record` of the raw_syscalls and
sched_switch tracepoints on that CPU, perf itself on PERF_CPU (0). The client is the
busiest thread outside the server's process in `perf script`'s output. A segment runs
from a system call's exit to the thread's next entry, leaving out the time between a
switch away from the thread and the switch back. Segments are grouped by the pair of
calls; per round trip: how many, and their median and mean in µs.
"""
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import rtt_clients

LINE = re.compile(r"\s*(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s+(.*)")
SWITCH = re.compile(r"prev_pid=(\d+).*next_pid=(\d+)")
NR = re.compile(r"NR (\d+)")
# x86_64 numbers of the calls the clients and the echo make on this path.
NAMES = {0: "read", 1: "write", 24: "sched_yield", 44: "sendto", 45: "recvfrom",
         232: "epoll_wait", 281: "epoll_pwait"}


def events(path):
    for line in open(path):
        m = LINE.match(line)
        if m:
            pid, tid, t, event, rest = m.groups()
            yield int(pid), int(tid), float(t), event, rest


def segments(path, server_pid):
    evs = list(events(path))
    entries = collections.Counter((pid, tid) for pid, tid, _, e, _ in evs if e.endswith("sys_enter"))
    if not entries:
        return None
    client = max((k for k in entries if k[0] != server_pid), key=lambda k: entries[k], default=None)
    if client is None:
        return None
    tid = client[1]
    out = collections.defaultdict(list)
    since = None     # when the current stretch on the CPU began (None: switched out)
    acc = 0.0        # user time of the open segment so far
    prev_nr = None   # the call whose exit opened the segment
    for _, t_tid, t, event, rest in evs:
        if event == "sched:sched_switch":
            m = SWITCH.search(rest)
            prev, nxt = int(m.group(1)), int(m.group(2))
            if prev == tid and since is not None:
                acc += t - since
                since = None
            if nxt == tid and prev_nr is not None:
                since = t
            continue
        if t_tid != tid:
            continue
        nr = int(NR.search(rest).group(1))
        if event.endswith("sys_exit"):
            prev_nr, acc, since = nr, 0.0, t
        elif prev_nr is not None:
            if since is not None:
                acc += t - since
            out[(NAMES.get(prev_nr, str(prev_nr)), NAMES.get(nr, str(nr)))].append(acc * 1e6)
            prev_nr, since = None, None
    return out


def traced(client, n, pin, perf_cpu, work):
    """Runs `client` under perf: (its JSON line or None, the segments or None)."""
    taskset = ["taskset", "-c", pin]
    server, port = rtt_clients.start_echo(taskset)
    data = os.path.join(work, f"{client}.data")
    try:
        run = subprocess.run(["taskset", "-c", perf_cpu, "perf", "record", "-q", "-o", data, "-C", pin,
                              "-e", "raw_syscalls:sys_enter", "-e", "raw_syscalls:sys_exit",
                              "-e", "sched:sched_switch", "--"] + taskset +
                             rtt_clients.client_argv(client, port, "rtt", n, 32, "text") + ["--warmup", "0"],
                             stdout=subprocess.PIPE, text=True)
    finally:
        server.kill()
        server.wait()
    text = os.path.join(work, f"{client}.txt")
    with open(text, "w") as out:
        subprocess.run(["perf", "script", "--ns", "-i", data, "-F", "pid,tid,time,event,trace"],
                       stdout=out, stderr=subprocess.DEVNULL, check=True)
    lines = run.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else None
    except ValueError:
        result = None
    return result, segments(text, server.pid)


def main(n, clients):
    rtt_clients.check("gaps", clients)
    pin, perf_cpu = os.environ.get("PIN_CPU", "1"), os.environ.get("PERF_CPU", "0")
    print(f"rtt 32 B, {n:,} round trips, client and server on CPU {pin}, picows echo: the client's "
          "time in user space between system calls (µs; each includes two tracepoints' cost)\n")
    print("| client | msgs/s (traced) | from → to | per round trip | median µs | mean µs |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for client in clients:
            report(client, n, *traced(client, n, pin, perf_cpu, work))


def report(client, n, result, seg):
    rate = f"{result['msgs_per_s']:,.0f}" if result and "msgs_per_s" in result else "–"
    if not seg:
        print(f"| {client} | {rate} | (no system calls traced) | | | |")
        return
    total = 0.0
    for (a, b), values in sorted(seg.items(), key=lambda kv: -len(kv[1])):
        per = len(values) / n
        if per < 0.05:
            continue
        mean = statistics.fmean(values)
        total += mean * per
        print(f"| {client} | {rate} | {a} → {b} | {per:.2f} | {statistics.median(values):.2f} | {mean:.2f} |")
    print(f"| {client} | {rate} | **all, per round trip** | | | **{total:.2f}** |")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2].split(","))
