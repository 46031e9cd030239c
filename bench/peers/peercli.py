"""What the Python peer clients share: the standard client command line, the
JSON result line, percentiles, and the fanout tick loop.

The workload definitions are peerbench's (its README), so the numbers compare
with it: percentiles index sorted[min(n-1, floor(p/100*n))]; a fanout tick
waits at most 1 s for its echoes; the spread of a tick is each receive time
minus the tick's first receive time.
"""
import argparse
import asyncio
import json
import os
import sys
import time

clock_ns = time.perf_counter_ns


def options(label):
    """The standard client CLI with peerbench's defaults filled in."""
    p = argparse.ArgumentParser(description="WebSocket benchmark client (" + label + ").")
    p.add_argument("--url", default="ws://127.0.0.1:9101/")
    p.add_argument("--workload", default="rtt", choices=("rtt", "pipelined", "fanout", "json"))
    for name, default in (("n", 100000), ("size", 32), ("window", 0), ("warmup", -1),
                          ("conns", 1000), ("duration", 10), ("concurrency", 200)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--type", choices=("text", "binary"))
    p.add_argument("--label", default=label)
    o = p.parse_args()
    o.type = o.type or ("binary" if o.workload == "pipelined" else "text")
    o.window = o.window or max(16, min(1024, 4 * 1048576 // max(1, o.size)))
    o.warmup = o.warmup if o.warmup >= 0 else min(1000, o.n // 10)
    return o


def use_uvloop():
    """Install uvloop (USE_UVLOOP=0 keeps asyncio's loop); returns the loop's name."""
    if os.environ.get("USE_UVLOOP", "1") != "1":
        return "asyncio"
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    uvloop.install()
    return "uvloop"


def own_vmhwm_kb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def pct(ordered, p):
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def report(o, **fields):
    line = {"peer": o.label, "workload": o.workload, "n": o.n, "size": o.size, "type": o.type}
    line.update(fields)
    line["vmhwm_kb"] = own_vmhwm_kb()
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def rtt_fields(o, latencies_us, elapsed_s):
    ordered = sorted(latencies_us)
    return {"ok": True, "elapsed_s": elapsed_s, "msgs_per_s": o.n / elapsed_s,
            "p50_us": pct(ordered, 50), "p99_us": pct(ordered, 99), "max_us": ordered[-1],
            "mean_us": sum(ordered) / len(ordered)}


def pipelined_fields(o, elapsed_s):
    return {"ok": True, "elapsed_s": elapsed_s, "window": o.window, "msgs_per_s": o.n / elapsed_s,
            "mib_per_s": o.n * o.size / elapsed_s / 1048576}


def json_template():
    """The JSON echo bot's message (bench/json/trade.json, 332 bytes) as text."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "json", "trade.json")) as f:
        return f.read()


def echo_payload(o):
    return "a" * o.size if o.type == "text" else b"a" * o.size


def tick_message(o, tick):
    """`%015d:` tick id, padded with 'x' to the message size."""
    return "%015d:%s" % (tick, "x" * max(0, o.size - 16))


async def open_all(o, dial):
    """Opens o.conns connections with at most o.concurrency dials in flight,
    three tries each. dial(index) returns the connection or raises.
    Returns (connections, failures, seconds)."""
    conns = [None] * o.conns
    failures = 0
    pending = iter(range(o.conns))

    async def worker():
        nonlocal failures
        for idx in pending:
            for attempt in range(3):
                try:
                    conns[idx] = await dial(idx)
                    break
                except Exception as e:  # noqa: BLE001 - any dial failure counts the same
                    if attempt == 2:
                        failures += 1
                        print("connect failed:", repr(e), file=sys.stderr)

    start = clock_ns()
    await asyncio.gather(*(worker() for _ in range(min(o.concurrency, o.conns))))
    return [c for c in conns if c is not None], failures, (clock_ns() - start) / 1e9


class Ticks:
    """Fanout bookkeeping: per connection, when the current tick's echo came back."""

    def __init__(self, conns):
        self.conns = conns
        self.current = -1
        self.started_ns = 0
        self.arrived_ms = [None] * conns
        self.got = 0
        self.late = 0
        self.done = []

    def echo(self, idx, tick):
        now = clock_ns()
        if tick == self.current and self.arrived_ms[idx] is None:
            self.arrived_ms[idx] = (now - self.started_ns) / 1e6
            self.got += 1
        else:
            self.late += 1

    def begin(self, tick):
        self.current, self.got = tick, 0
        self.arrived_ms = [None] * self.conns
        self.started_ns = clock_ns()

    def end(self, send_ms):
        lat = sorted(x for x in self.arrived_ms if x is not None)
        spread = [x - lat[0] for x in lat]
        self.done.append({"recv": len(lat), "lat_p50_ms": pct(lat, 50), "lat_p99_ms": pct(lat, 99),
                          "lat_max_ms": lat[-1] if lat else None, "spread_p99_ms": pct(spread, 99),
                          "spread_max_ms": spread[-1] if spread else None,
                          "within200": sum(1 for x in spread if x <= 200), "send_ms": send_ms})
        self.current = -2 - self.current

    async def run(self, o, live, send_all):
        """o.duration ticks one second apart; each sends once on every live
        connection and waits for the echoes until the next tick is due."""
        base = clock_ns()
        for tick in range(o.duration):
            due = base + tick * 1_000_000_000
            delay = (due - clock_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            self.begin(tick)
            await send_all(tick_message(o, tick))
            send_ms = (clock_ns() - self.started_ns) / 1e6
            while self.got < live and clock_ns() < due + 1_000_000_000:
                await asyncio.sleep(0.002)
            self.end(send_ms)

    def summary(self, o, live, failures, connect_s):
        ticks = self.done
        expected = len(ticks) * live
        received = sum(t["recv"] for t in ticks)

        def worst(key):
            return max((float("inf") if t[key] is None else t[key]) for t in ticks) if ticks else None

        p50s = sorted(t["lat_p50_ms"] for t in ticks if t["lat_p50_ms"] is not None)
        return {"ok": failures == 0 and received == expected, "conns": o.conns, "connected": live,
                "connect_failures": failures, "duration": o.duration, "connect_s": connect_s,
                "ticks": len(ticks), "expected": expected, "received": received, "late": self.late,
                "lat_p50_ms_med": pct(p50s, 50), "lat_p99_ms_max": worst("lat_p99_ms"),
                "lat_max_ms": worst("lat_max_ms"), "spread_p99_ms_max": worst("spread_p99_ms"),
                "spread_max_ms": worst("spread_max_ms"), "send_ms_max": worst("send_ms"),
                "within200_frac": sum(t["within200"] for t in ticks) / expected if expected else 0,
                "pass_spread200_p99": live > 0 and all(t["within200"] >= 0.99 * live for t in ticks)}


def main(o, workloads):
    """Runs o.workload from {name: coroutine function}; a failure is still one JSON line."""
    try:
        asyncio.run(workloads[o.workload]())
    except Exception as e:  # noqa: BLE001 - the driver wants the reason in the JSON line
        report(o, ok=False, error=repr(e))
        sys.exit(1)
