"""Echo peer for the interop tests, on Python websockets (run by a venv python).

usage: python echo_websockets.py [--tls CERT KEY]
Prints "READY <port>", then one "CLOSE <code> <reason>" line per client close.
Echoes every message with its type; subprotocols chat.v2 and echo are accepted;
"__headers__" replies with the request headers as JSON; "__close__ CODE REASON" makes
the server close with that code. An upgrade to /refuse is refused: 403, body "no token given";
one to /private needs HTTP Basic authentication as ann, password "s@cret 1" (websockets'
own basic_auth), else 401.
"""
import asyncio
import json
import ssl
import sys

from websockets.asyncio.server import basic_auth, serve
from websockets.exceptions import ConnectionClosed

from peer_lifetime import until_parent_exits


async def handler(ws):
    try:
        async for message in ws:
            if message == "__headers__":
                await ws.send(json.dumps({k.lower(): v for k, v in ws.request.headers.raw_items()}))
            elif isinstance(message, str) and message.startswith("__close__ "):
                _, code, *reason = message.split(" ")
                await ws.close(int(code), " ".join(reason))
            else:
                await ws.send(message)
    except ConnectionClosed:
        pass
    rcvd = ws.protocol.close_rcvd
    if rcvd is not None:
        print(f"CLOSE {rcvd.code} {rcvd.reason}", flush=True)


private = basic_auth(realm="moonwire-test", credentials=("ann", "s@cret 1"))


async def process_request(connection, request):
    if request.path == "/refuse":
        return connection.respond(403, "no token given\n")
    if request.path == "/private":
        return await private(connection, request)
    return None


def select_subprotocol(connection, offered):
    # Unlike subprotocols=[...], this also accepts clients that offer none.
    return next((p for p in ("chat.v2", "echo") if p in offered), None)


async def main():
    context = None
    if len(sys.argv) > 3 and sys.argv[1] == "--tls":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[2], sys.argv[3])
    async with serve(handler, "127.0.0.1", 0, ssl=context, select_subprotocol=select_subprotocol,
                     process_request=process_request,
                     max_size=64 * 1024 * 1024, compression="deflate") as server:
        port = server.sockets[0].getsockname()[1]
        print(f"READY {port}", flush=True)
        await until_parent_exits()


asyncio.run(main())
