#!/usr/bin/env python3
"""Peer client: picows 2.3.1 on uvloop, through its callback API (no asyncio
streams, so this is the fastest Python peer). Workloads rtt, pipelined,
fanout with the standard client CLI; prints one JSON line."""
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peercli  # noqa: E402
from picows import WSListener, WSMsgType, ws_connect  # noqa: E402

o = peercli.options("picows")
LOOP = peercli.use_uvloop()
KIND = WSMsgType.TEXT if o.type == "text" else WSMsgType.BINARY
PAYLOAD = b"a" * o.size
DIAL = {"enable_auto_ping": False, "max_frame_size": 256 * 1048576, "websocket_handshake_timeout": 120}


class Workload(WSListener):
    """One connection's echo handler; `finished` resolves when the workload is done."""

    def __init__(self):
        self.finished = asyncio.get_running_loop().create_future()

    def settle(self, error=None):
        if self.finished.done():
            return
        if error:
            self.finished.set_exception(error)
        else:
            self.finished.set_result(None)

    def on_ws_disconnected(self, transport):
        self.settle(RuntimeError("disconnected early"))

    def on_ws_frame(self, transport, frame):
        if frame.msg_type != KIND:
            return
        if frame.payload_size != o.size:
            self.settle(RuntimeError("bad echo length %d" % frame.payload_size))
            return
        self.echoed(transport)


class PingPong(Workload):
    def __init__(self):
        super().__init__()
        self.count = 0
        self.latencies = [0.0] * o.n
        self.sent_ns = self.timed_from_ns = 0
        self.elapsed_s = 0.0

    def start(self, transport):
        self.timed_from_ns = self.sent_ns = peercli.clock_ns()
        transport.send(KIND, PAYLOAD)

    def echoed(self, transport):
        now = peercli.clock_ns()
        if self.count >= o.warmup:
            self.latencies[self.count - o.warmup] = (now - self.sent_ns) / 1000
        self.count += 1
        if self.count == o.warmup:
            self.timed_from_ns = peercli.clock_ns()
        if self.count == o.warmup + o.n:
            self.elapsed_s = (peercli.clock_ns() - self.timed_from_ns) / 1e9
            self.settle()
            return
        self.sent_ns = peercli.clock_ns()
        transport.send(KIND, PAYLOAD)


class Window(Workload):
    def __init__(self):
        super().__init__()
        self.sent = self.received = 0
        self.refill_at = max(1, o.window >> 2)

    def fill(self, transport):
        while self.sent < o.n and self.sent - self.received < o.window:
            transport.send(KIND, PAYLOAD)
            self.sent += 1

    def echoed(self, transport):
        self.received += 1
        if self.received == o.n:
            self.settle()
        elif o.window - (self.sent - self.received) >= self.refill_at:
            self.fill(transport)


async def rtt():
    transport, handler = await ws_connect(PingPong, o.url, **DIAL)
    handler.start(transport)
    await handler.finished
    transport.disconnect(graceful=False)
    peercli.report(o, loop=LOOP, **peercli.rtt_fields(o, handler.latencies, handler.elapsed_s))


async def pipelined(listener=Window):
    """`window` messages in flight (the JSON echo bot too, with its own listener)."""
    transport, handler = await ws_connect(listener, o.url, **DIAL)
    start = peercli.clock_ns()
    handler.fill(transport)
    await handler.finished
    elapsed = (peercli.clock_ns() - start) / 1e9
    transport.disconnect(graceful=False)
    peercli.report(o, loop=LOOP, **peercli.pipelined_fields(o, elapsed))


class JsonBot(WSListener):
    """The JSON echo bot with orjson: loads, read a field, dumps, send."""

    def __init__(self):
        import orjson
        self.loads, self.dumps = orjson.loads, orjson.dumps
        self.template = orjson.loads(peercli.json_template())
        self.finished = asyncio.get_running_loop().create_future()
        self.sent = self.received = 0

    def on_ws_disconnected(self, transport):
        if not self.finished.done():
            self.finished.set_exception(RuntimeError("disconnected early"))

    def fill(self, transport):
        while self.sent < o.n and self.sent < o.window:
            transport.send(WSMsgType.TEXT, self.dumps(self.template))
            self.sent += 1

    def on_ws_frame(self, transport, frame):
        if frame.msg_type != WSMsgType.TEXT or self.finished.done():
            return
        msg = self.loads(frame.get_payload_as_memoryview())
        if msg["seq"] is None:
            self.finished.set_exception(RuntimeError("bad echo"))
            return
        self.received += 1
        if self.received == o.n:
            self.finished.set_result(None)
        elif self.sent < o.n:
            transport.send(WSMsgType.TEXT, self.dumps(msg))
            self.sent += 1


async def json_bot():
    await pipelined(JsonBot)


async def fanout():
    ticks = peercli.Ticks(o.conns)

    class Echoes(WSListener):
        def __init__(self, idx):
            self.idx = idx

        def on_ws_frame(self, transport, frame):
            if frame.msg_type == WSMsgType.TEXT:
                ticks.echo(self.idx, int(frame.get_payload_as_bytes()[:15]))

    async def dial(idx):
        transport, _ = await ws_connect(lambda: Echoes(idx), o.url, **DIAL)
        return transport

    live, failures, connect_s = await peercli.open_all(o, dial)

    async def send_all(message):
        data = message.encode()
        for transport in live:
            transport.send(WSMsgType.TEXT, data)

    await ticks.run(o, len(live), send_all)
    peercli.report(o, loop=LOOP, **ticks.summary(o, len(live), failures, connect_s))
    os._exit(0)  # closing thousands of sockets one by one would only add to wall time


if __name__ == "__main__":
    peercli.main(o, {"rtt": rtt, "pipelined": pipelined, "fanout": fanout, "json": json_bot})
