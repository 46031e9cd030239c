"""A server that shuts down cleanly on SIGTERM, as servers do for a restart
(Python websockets, run by the venv python).

usage: python restart_peer.py [--port PORT] [--close-code CODE] [--name NAME]
Prints "READY <port>" once it listens. Answers every message with "NAME: <message>".
On SIGTERM it closes every client with CODE (default 1001, "going away"; aiohttp and
many servers say 1000) and the reason "restart", prints "STOPPED", and exits 0.
Started again with --port on the same port, a bot that reconnects finds it.
"""
import argparse
import asyncio
import signal

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

clients = set()


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--close-code", type=int, default=1001)
    parser.add_argument("--name", default="server")
    args = parser.parse_args()

    async def handler(ws):
        clients.add(ws)
        try:
            async for message in ws:
                await ws.send(f"{args.name}: {message}")
        except ConnectionClosed:
            pass
        finally:
            clients.discard(ws)

    # A test runner may start its children with SIGTERM blocked.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
    async with serve(handler, "127.0.0.1", args.port) as server:
        print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
        await stop
        await asyncio.gather(*(ws.close(args.close_code, "restart") for ws in list(clients)))
    print("STOPPED", flush=True)


asyncio.run(main())
