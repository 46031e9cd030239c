"""Pings a moonwire script the way real protocols do, and checks the answers (auto_reply).

usage: python probe_peer.py serve          prints "READY <port>", probes each client that connects
       python probe_peer.py connect URL    probes the server at URL, prints one line per answer

Probes, each answered before the next: Socket.IO (Engine.IO v4) "2" -> "3",
graphql-transport-ws {"type":"ping"} -> {"type":"pong"}, and {"type": "ping"} as Python's
json writes it -> {"type":"pong"}. Before each, "hello N" must come back as "echo: hello N"
(the script's on_message answers it), so a probe that reached on_message would come back
echoed in its answer's place. Then "verdict: ok (N pings answered)" or "verdict: FAIL ..."
goes to the script, which closes.
"""
import asyncio
import json
import sys

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve

PROBES = [
    ("2", "3"),
    ('{"type":"ping"}', '{"type":"pong"}'),
    (json.dumps({"type": "ping"}), '{"type":"pong"}'),
]


async def probe(ws, report):
    for i, (ping, pong) in enumerate(PROBES, 1):
        await ws.send(f"hello {i}")
        got = await asyncio.wait_for(ws.recv(), 10)
        if got != f"echo: hello {i}":
            return f"FAIL: hello {i} came back as {got!r}"
        await ws.send(ping)
        got = await asyncio.wait_for(ws.recv(), 10)
        if got != pong:
            return f"FAIL: {ping} was answered with {got!r}, not {pong}"
        report(f"OK {ping} -> {got}")
    return f"ok ({len(PROBES)} pings answered)"


async def handler(ws):
    verdict = await probe(ws, lambda line: None)
    await ws.send("verdict: " + verdict)
    try:
        await asyncio.wait_for(ws.wait_closed(), 10)
    except asyncio.TimeoutError:
        pass


async def main():
    if sys.argv[1] == "serve":
        async with serve(handler, "127.0.0.1", 0) as server:
            print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
            await asyncio.Future()
    async with connect(sys.argv[2]) as ws:
        verdict = await probe(ws, lambda line: print(line, flush=True))
        print("verdict:", verdict, flush=True)
        await ws.send("verdict: " + verdict)
        await asyncio.wait_for(ws.wait_closed(), 10)
        return 0 if verdict.startswith("ok") else 1


sys.exit(asyncio.run(main()))
