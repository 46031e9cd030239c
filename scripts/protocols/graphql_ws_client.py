"""The real Python GraphQL client `gql` (WebsocketsTransport, both subprotocols)
against moonwire's GraphQL-WS mock (examples/graphql_ws_mock.lua).

usage: python graphql_ws_client.py URL      (ws://127.0.0.1:PORT/graphql)
Prints one line per check and "ALL OK"; exits 1 on the first failure.
"""
import asyncio
import sys

from gql import Client, gql
from gql.transport.exceptions import TransportQueryError
from gql.transport.websockets import WebsocketsTransport


def check(cond, what):
    if not cond:
        print(f"FAIL {what}", flush=True)
        sys.exit(1)
    print(f"ok   {what}", flush=True)


async def run(url, subprotocol):
    transport = WebsocketsTransport(url=url, subprotocols=[subprotocol], init_payload={"token": "py"})
    async with Client(transport=transport, fetch_schema_from_transport=False) as session:
        check(transport.subprotocol == subprotocol, f"{subprotocol}: negotiated")
        r = await session.execute(gql("query Hello($name: String) { hello(name: $name) }"), variable_values={"name": "py"})
        check(r == {"hello": "hello py"}, f"{subprotocol}: query with variables: {r}")
        r = await session.execute(gql("query Token { token }"))
        check(r == {"token": "py"}, f"{subprotocol}: connection_init payload reached the resolver: {r}")
        r = await session.execute(gql("mutation Post($text: String) { post(text: $text) }"), variable_values={"text": "x"})
        check(isinstance(r.get("post"), int), f"{subprotocol}: mutation: {r}")
        try:
            await session.execute(gql("query Boom { boom }"))
            check(False, f"{subprotocol}: resolver error")
        except TransportQueryError as e:
            check("boom went the resolver" in str(e), f"{subprotocol}: resolver error: {e}")
        got = []
        async for r in session.subscribe(gql("subscription Count($to: Int) { count }"), variable_values={"to": 4}):
            got.append(r["count"])
        check(got == [1, 2, 3, 4], f"{subprotocol}: subscription until complete: {got}")
        got = []
        async for r in session.subscribe(gql("subscription Count($to: Int) { count }"), variable_values={"to": 1000}):
            got.append(r["count"])
            if len(got) == 3:
                break
        check(got == [1, 2, 3], f"{subprotocol}: subscription stopped by the client")
        # The mock pings (graphql-transport-ws) or sends ka (graphql-ws) every second.
        await asyncio.sleep(1.5)
        r = await session.execute(gql("query Hello { hello }"))
        check(r == {"hello": "hello world"}, f"{subprotocol}: still served after a keep-alive")


async def refused(url, subprotocol):
    transport = WebsocketsTransport(url=url, subprotocols=[subprotocol], init_payload={"token": "bad"})
    try:
        async with Client(transport=transport, fetch_schema_from_transport=False):
            pass
        check(False, f"{subprotocol}: refused connection_init")
    except Exception as e:
        check(True, f"{subprotocol}: refused connection_init: {type(e).__name__}: {e}")


async def main(url):
    for sp in (WebsocketsTransport.GRAPHQLWS_SUBPROTOCOL, WebsocketsTransport.APOLLO_SUBPROTOCOL):
        await run(url, sp)
        await refused(url, sp)
    print("ALL OK", flush=True)


asyncio.run(main(sys.argv[1]))
