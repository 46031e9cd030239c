#!/usr/bin/env python3
"""Where a message's time goes, per process: bench/cpusplit.sh's driver.

For each client (moonwire, picows, the C floor) it runs one workload against a fresh
picows echo server, twice: N and 2N messages. The difference of the two runs divided
by N cancels start-up and teardown. Per message it reports:
  wall     elapsed time of the client run
  client   CPU of the client (getrusage of the child): the total, then user and system
  server   CPU of the echo server (/proc/PID/stat): the same three
  other    wall minus those four: time no one of the two ran (cross-CPU wake-ups)
           or another process did; negative unpinned, where the two run at once
  csw      context switches per 1000 messages: the client's voluntary ones (it blocked
           waiting) and the server's involuntary ones (it was preempted)
The totals are exact: Linux keeps each task's time on the CPU to the nanosecond and
scales the user and system figures to add up to it. The split between user and system is
not, on a kernel with tick-based accounting (CONFIG_TICK_CPU_ACCOUNTING, as on the
machines measured here): it samples which of the two a process was in at each clock
tick, milliseconds apart, while a round trip takes tens of microseconds. Compare totals;
read the split only over many rounds. Repeated REPEAT times; the table shows medians.
Pinned (PIN_CPU, default 1): client and server on that CPU, as in bench/run.sh's rtt
and pipelined sections.
"""
import json
import os
import statistics
import subprocess
import sys

import rtt_clients

TICK = os.sysconf("SC_CLK_TCK")


def proc_times(pid):
    """User and system CPU seconds, voluntary and involuntary context switches."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    switches = {}
    for line in open(f"/proc/{pid}/status"):
        if "ctxt_switches" in line:
            key, value = line.split(":")
            switches[key.strip()] = int(value)
    return (int(fields[11]) / TICK, int(fields[12]) / TICK,
            switches["voluntary_ctxt_switches"], switches["nonvoluntary_ctxt_switches"])


def main():
    workload, size, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    clients = sys.argv[4].split(",")
    rtt_clients.check("cpusplit", clients)
    repeat, cpu = int(os.environ.get("REPEAT", "3")), os.environ.get("PIN_CPU", "1")
    pin = ["taskset", "-c", cpu] if cpu else []
    kind = "text" if workload == "rtt" else "binary"

    def run(client, count):
        server, port = rtt_clients.start_echo(pin)
        try:
            s0 = proc_times(server.pid)
            child = subprocess.Popen(pin + rtt_clients.client_argv(client, port, workload, count, size, kind),
                                     stdout=subprocess.PIPE, text=True)
            start = os.times().elapsed
            _, status, usage = os.wait4(child.pid, 0)
            wall = os.times().elapsed - start
            out = child.stdout.read()
            s1 = proc_times(server.pid)
        finally:
            server.kill()
            server.wait()
        result = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        if status != 0 or not result.get("ok"):
            sys.exit(f"cpusplit: {client} failed: {out.strip() or status}")
        return (wall, usage.ru_utime, usage.ru_stime, s1[0] - s0[0], s1[1] - s0[1],
                usage.ru_nvcsw, s1[3] - s0[3], result["msgs_per_s"])

    rows = {c: [] for c in clients}
    for _ in range(repeat):
        for client in clients:
            a, b = run(client, n), run(client, 2 * n)
            per = [(b[i] - a[i]) / n * 1e6 for i in range(5)]          # µs per message
            csw = [(b[i] - a[i]) / n * 1e3 for i in (5, 6)]           # per 1000 messages
            rows[client].append(per + [per[0] - sum(per[1:5])] + csw + [b[7]])
    pinned = f"client and server on CPU {cpu}" if cpu else "unpinned"
    print(f"{workload} {size} B, {n} and {2 * n} messages, {pinned}, picows echo, "
          f"medians of {repeat} (µs per message; context switches per 1000 messages)\n")
    print("| client | msgs/s | wall µs | client CPU | user | sys | server CPU | user | sys "
          "| other | client waits / 1k | server preempted / 1k |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for client in clients:
        m = [statistics.median(r[i] for r in rows[client]) for i in range(9)]
        client_cpu = statistics.median(r[1] + r[2] for r in rows[client])
        server_cpu = statistics.median(r[3] + r[4] for r in rows[client])
        print(f"| {client} | {m[8]:,.0f} | {m[0]:.2f} | {client_cpu:.2f} | {m[1]:.2f} | {m[2]:.2f} | "
              f"{server_cpu:.2f} | {m[3]:.2f} | {m[4]:.2f} | {m[5]:.2f} | {m[6]:.1f} | {m[7]:.1f} |")


if __name__ == "__main__":
    main()
