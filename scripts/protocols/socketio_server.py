"""The real Socket.IO server the moonwire.socketio tests run against
(python-socketio 5 on aiohttp, in the venv).

usage: python socketio_server.py [PORT]     (0 or none: any free port)
Prints "READY <port>" once it listens. Restarted on the same PORT, it is the
same server again (the reconnect test kills and restarts it).

Namespace "/":
  "echo" (...)            -> emits "echo" back to the sender with the same arguments
  "add" (a, b)            -> acknowledged with a + b
  "reverse" (bytes)       -> acknowledged with the bytes reversed and their length (binary ack)
  "blob" (n)              -> emits "blob" to the sender: {"name": "blob", "data": <n bytes>}
                             and a second binary argument (two attachments)
  "ask" (question)        -> calls the client's "question" event with an ack, then emits
                             "answer" with what the client acknowledged
  "join" (room)           -> enters the room, acknowledged with the room's name
  "leave" (room)          -> leaves the room, acknowledged
  "to_room" (room, text)  -> emits "room" (room, text) to everyone in the room
  "kick" ()               -> the server disconnects the sender from "/"
Namespace "/chat" (needs auth {"token": "secret"}, else CONNECT_ERROR "not authorized"):
  "say" (text)            -> emits "said" (text) to everyone in /chat, acknowledged with "ok"
"""
import asyncio
import sys

import socketio
from aiohttp import web

sio = socketio.AsyncServer(async_mode="aiohttp", ping_interval=1, ping_timeout=5)
app = web.Application()
sio.attach(app)


@sio.event
async def echo(sid, *args):
    await sio.emit("echo", args, to=sid)


@sio.event
async def add(sid, a, b):
    return a + b


@sio.event
async def reverse(sid, data):
    return bytes(reversed(data)), len(data)


@sio.event
async def blob(sid, n):
    await sio.emit("blob", ({"name": "blob", "data": bytes(range(256)) * (n // 256) + bytes(range(n % 256))},
                            b"\x00\xff"), to=sid)


@sio.event
async def ask(sid, question):
    answer = await sio.call("question", question, to=sid, timeout=5)
    await sio.emit("answer", answer, to=sid)


@sio.event
async def join(sid, room):
    await sio.enter_room(sid, room)
    return room


@sio.event
async def leave(sid, room):
    await sio.leave_room(sid, room)
    return True


@sio.event
async def to_room(sid, room, text):
    await sio.emit("room", (room, text), room=room)


@sio.event
async def kick(sid):
    await sio.disconnect(sid)


@sio.on("connect", namespace="/chat")
async def chat_connect(sid, environ, auth):
    if not isinstance(auth, dict) or auth.get("token") != "secret":
        raise socketio.exceptions.ConnectionRefusedError("not authorized")


@sio.on("say", namespace="/chat")
async def chat_say(sid, text):
    await sio.emit("said", text, namespace="/chat")
    return "ok"


async def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, reuse_address=True)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"READY {port}", flush=True)
    await asyncio.Future()


asyncio.run(main())
