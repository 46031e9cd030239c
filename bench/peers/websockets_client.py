#!/usr/bin/env python3
"""Peer client: Python websockets 17.4, its asyncio implementation (on uvloop
unless USE_UVLOOP=0). Workloads rtt, pipelined, fanout with the standard
client CLI; prints one JSON line."""
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peercli  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

o = peercli.options("websockets")
LOOP = peercli.use_uvloop()
DIAL = {"compression": None, "max_size": None, "ping_interval": None, "open_timeout": 120,
        "close_timeout": 1}


def check(echo):
    if len(echo) != o.size:
        raise RuntimeError("bad echo length %d" % len(echo))


async def rtt():
    payload = peercli.echo_payload(o)
    async with connect(o.url, **DIAL) as ws:
        for _ in range(o.warmup):
            await ws.send(payload)
            check(await ws.recv())
        latencies = [0.0] * o.n
        start = peercli.clock_ns()
        for i in range(o.n):
            sent = peercli.clock_ns()
            await ws.send(payload)
            echo = await ws.recv()
            latencies[i] = (peercli.clock_ns() - sent) / 1000
            check(echo)
        elapsed = (peercli.clock_ns() - start) / 1e9
    peercli.report(o, loop=LOOP, **peercli.rtt_fields(o, latencies, elapsed))


async def pipelined():
    payload = peercli.echo_payload(o)
    ws = await connect(o.url, **DIAL)
    in_flight = asyncio.Semaphore(o.window)

    async def sender():
        for _ in range(o.n):
            await in_flight.acquire()
            await ws.send(payload)

    start = peercli.clock_ns()
    sending = asyncio.create_task(sender())
    for _ in range(o.n):
        check(await ws.recv())
        in_flight.release()
    elapsed = (peercli.clock_ns() - start) / 1e9
    await sending
    ws.transport.abort()
    peercli.report(o, loop=LOOP, **peercli.pipelined_fields(o, elapsed))


async def json_bot():
    """The JSON echo bot with the json module: loads, read a field, dumps, send."""
    import json
    template = json.loads(peercli.json_template())
    ws = await connect(o.url, **DIAL)
    start = peercli.clock_ns()
    sent = 0
    while sent < o.n and sent < o.window:
        await ws.send(json.dumps(template))
        sent += 1
    for _ in range(o.n):
        msg = json.loads(await ws.recv())
        if msg["seq"] is None:
            raise RuntimeError("bad echo")
        if sent < o.n:
            await ws.send(json.dumps(msg))
            sent += 1
    elapsed = (peercli.clock_ns() - start) / 1e9
    ws.transport.abort()
    peercli.report(o, loop=LOOP, **peercli.pipelined_fields(o, elapsed))


async def fanout():
    ticks = peercli.Ticks(o.conns)
    readers = []

    async def read(idx, ws):
        try:
            async for message in ws:
                ticks.echo(idx, int(message[:15]))
        except Exception:  # noqa: BLE001 - a dropped connection shows up as a missing echo
            pass

    async def dial(idx):
        ws = await connect(o.url, **DIAL)
        readers.append(asyncio.create_task(read(idx, ws)))
        return ws

    live, failures, connect_s = await peercli.open_all(o, dial)

    async def send_all(message):
        for ws in live:
            await ws.send(message)

    await ticks.run(o, len(live), send_all)
    peercli.report(o, loop=LOOP, **ticks.summary(o, len(live), failures, connect_s))
    os._exit(0)  # closing thousands of sockets one by one would only add to wall time


if __name__ == "__main__":
    peercli.main(o, {"rtt": rtt, "pipelined": pipelined, "fanout": fanout, "json": json_bot})
