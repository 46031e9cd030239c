#!/usr/bin/env python3
"""The echo bot (bench/echo_bot/run.sh) in Python: picows 2.3.1 on uvloop (its callback
API, the fastest Python WebSocket client) and Python's protobuf (upb): every binary
message is parsed into an echo.Envelope, gets hops + 1, and is serialized back.

    bot_picows.py DESCRIPTORS URL     (DESCRIPTORS: protoc --descriptor_set_out of echo.proto)"""
import asyncio
import os
import sys

import uvloop
from google.protobuf.internal import api_implementation
from picows import WSListener, WSMsgType, ws_connect

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import messages  # noqa: E402

if api_implementation.Type() != "upb":
    sys.exit("echo bot: protobuf runs on %s, not upb" % api_implementation.Type())
Envelope = messages.envelope_class(sys.argv[1])
BINARY = WSMsgType.BINARY


class Bot(WSListener):
    def __init__(self):
        self.closed = asyncio.get_running_loop().create_future()

    def on_ws_frame(self, transport, frame):
        if frame.msg_type == BINARY:
            env = Envelope.FromString(frame.get_payload_as_bytes())
            env.hops += 1
            transport.send(BINARY, env.SerializeToString())
        elif frame.msg_type == WSMsgType.CLOSE:
            transport.send_close(frame.get_close_code())
            transport.disconnect()

    def on_ws_disconnected(self, transport):
        if not self.closed.done():
            self.closed.set_result(None)


async def main():
    _, bot = await ws_connect(Bot, sys.argv[2], enable_auto_ping=False, max_frame_size=1 << 20)
    await bot.closed


uvloop.run(main())
