"""Socket.IO v4 server for the scripting tests (python-socketio on aiohttp, in the venv).

usage: python socketio_server.py [--ping-interval S --ping-timeout S]
Prints "READY <port>". Events: "chat" is answered with a "chat" event to the sender
("echo: <text>"); "add" is acknowledged with the sum of its arguments.
"""
import argparse
import asyncio

import socketio
from aiohttp import web

from peer_lifetime import until_parent_exits

parser = argparse.ArgumentParser()
parser.add_argument("--ping-interval", type=float, default=25)
parser.add_argument("--ping-timeout", type=float, default=20)
args = parser.parse_args()
sio = socketio.AsyncServer(async_mode="aiohttp", ping_interval=args.ping_interval, ping_timeout=args.ping_timeout)
app = web.Application()
sio.attach(app)


@sio.event
async def chat(sid, text):
    await sio.emit("chat", "echo: " + text, to=sid)


@sio.event
async def add(sid, a, b):
    return a + b


async def main():
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"READY {port}", flush=True)
    await until_parent_exits()


asyncio.run(main())
