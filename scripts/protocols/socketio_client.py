"""The real python-socketio client against moonwire's Socket.IO mock
(examples/socketio_mock.lua): namespaces with auth and a refusal, events, acks
both ways, binary attachments, rooms between two clients, a server-side
disconnect, and Engine.IO pings over several ping intervals.

usage: python socketio_client.py URL      (http://127.0.0.1:PORT)
Prints one line per check and "ALL OK"; exits 1 on the first failure.
"""
import asyncio
import sys

import socketio


def check(cond, what):
    if not cond:
        print(f"FAIL {what}", flush=True)
        sys.exit(1)
    print(f"ok   {what}", flush=True)


async def main(url):
    a = socketio.AsyncClient()
    b = socketio.AsyncClient()
    echoes, rooms, said, answers = asyncio.Queue(), asyncio.Queue(), asyncio.Queue(), asyncio.Queue()

    @a.on("echo")
    async def on_echo(*args):
        await echoes.put(args)

    @a.on("room")
    async def on_room(room, text):
        await rooms.put((room, text))

    @a.on("said", namespace="/chat")
    async def on_said(text):
        await said.put(text)

    @a.on("question")
    async def on_question(q):
        return "python says: " + q

    @a.on("answer")
    async def on_answer(text):
        await answers.put(text)

    await a.connect(url, transports=["websocket"], namespaces=["/", "/chat"], auth={"token": "secret"}, wait_timeout=5)
    check(a.connected and set(a.namespaces) == {"/", "/chat"}, "connected to / and /chat with auth")

    await a.emit("echo", ("hi", 1, {"k": [1, 2]}, None))
    got = await asyncio.wait_for(echoes.get(), 5)
    check(got == ("hi", 1, {"k": [1, 2]}, None), f"event echoed back: {got!r}")

    check(await a.call("add", (40, 2), timeout=5) == 42, "ack with the sum (client asks, server answers)")

    rev = await a.call("reverse", b"\x00\x01\xfe\xff", timeout=5)
    check(rev == [b"\xff\xfe\x01\x00", 4] or rev == (b"\xff\xfe\x01\x00", 4), f"binary attachment and binary ack: {rev!r}")

    await a.emit("ask", "why")
    check(await asyncio.wait_for(answers.get(), 5) == "python says: why", "server asks with an ack, client answers")

    check(await a.call("say", "hello chat", namespace="/chat", timeout=5) == "ok", "ack in /chat")
    check(await asyncio.wait_for(said.get(), 5) == "hello chat", "broadcast in /chat")

    await b.connect(url, transports=["websocket"], wait_timeout=5)
    check(await a.call("join", "blue", timeout=5) == "blue", "joined a room")
    await b.emit("to_room", ("blue", "to the blue room"))
    check(await asyncio.wait_for(rooms.get(), 5) == ("blue", "to the blue room"), "room emit reached the member")
    check(await a.call("leave", "blue", timeout=5) is True, "left the room")

    refused = socketio.AsyncClient()
    refusal = []

    @refused.on("connect_error", namespace="/chat")
    async def on_connect_error(data):
        refusal.append(data)

    try:
        await refused.connect(url, transports=["websocket"], namespaces=["/chat"], auth={"token": "wrong"}, wait_timeout=5)
        check(False, "refused with a wrong token")
    except socketio.exceptions.ConnectionError:
        check(refusal == [{"message": "not authorized"}], f"refused with a wrong token: {refusal}")
    finally:
        await refused.disconnect()

    # The mock pings every 0.5 s and drops a client that does not answer within 2 s.
    await asyncio.sleep(2.5)
    check(a.connected and await a.call("add", (1, 2), timeout=5) == 3, "still connected after 5 ping intervals")

    disconnected = asyncio.Event()

    @b.event
    async def disconnect(*reason):
        disconnected.set()

    await b.emit("kick")
    await asyncio.wait_for(disconnected.wait(), 5)
    check(True, "the server disconnected the client")

    await a.disconnect()
    await b.disconnect()
    print("ALL OK", flush=True)


asyncio.run(main(sys.argv[1]))
