#!/usr/bin/env python3
"""The reference WebSocket echo server: picows 2.3.1 on uvloop (the fastest peer
we have, so it is rarely the bottleneck). Echoes every data frame as it came
(opcode and fin kept), answers pings, closes on close.

    python echo_picows.py [PORT [HOST]]      PORT 0 (default): any free port

Prints `READY <port>` once listening; SIGTERM or SIGINT stops it."""
import asyncio
import signal
import sys

from picows import WSListener, WSMsgType, ws_create_server


class Echo(WSListener):
    def on_ws_frame(self, transport, frame):
        kind = frame.msg_type
        if kind == WSMsgType.PING:
            transport.send_pong(frame.get_payload_as_bytes())
        elif kind == WSMsgType.CLOSE:
            transport.send_close(frame.get_close_code(), frame.get_close_message())
            transport.disconnect()
        elif kind != WSMsgType.PONG:
            transport.send(kind, frame.get_payload_as_memoryview(), frame.fin)


async def serve(port, host):
    server = await ws_create_server(lambda request: Echo(), host, port, backlog=4096,
                                    max_frame_size=256 * 1048576, websocket_handshake_timeout=60)
    print("READY", server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0,
                      sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"))
