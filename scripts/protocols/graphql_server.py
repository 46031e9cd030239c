"""The real GraphQL server the moonwire.graphql_ws tests run against: Strawberry
on aiohttp (in the venv), which serves both WebSocket subprotocols on one
endpoint, graphql-transport-ws and the legacy graphql-ws
(subscriptions-transport-ws), and picks the one the client offers.

usage: python graphql_server.py [PORT]     (0 or none: any free port)
Prints "READY <port>"; the endpoint is ws://127.0.0.1:PORT/graphql. Restarted on
the same PORT, it is the same server again (the reconnect test kills it).

connection_init payload {"token": "bad"} is refused (graphql-transport-ws:
close 4403 Forbidden; graphql-ws: connection_error).
Schema:
  query    hello(name: String = "world"): String     -> "hello <name>"
  query    add(a: Int!, b: Int!): Int
  query    boom: String                               -> a GraphQL error "boom went the field"
  query    token: String                              -> the connection_init payload's token
  mutation setMessage(text: String!): String          -> stores and returns it
  query    message: String
  subscription count(to: Int!, delay: Float = 0.01): Int     -> 1..to, then complete
  subscription ticks(delay: Float = 0.2): Int                 -> 1, 2, 3, ... until stopped
  subscription failing(after: Int!): Int              -> 1..after, then an error
  subscription token: String                          -> the connection_init payload's token, once
On the legacy graphql-ws protocol Strawberry runs subscriptions only (a query gets
the error "queries are not allowed").
"""
import asyncio
import sys
import typing

import strawberry
from aiohttp import web
from strawberry.aiohttp.views import GraphQLView
from strawberry.exceptions import ConnectionRejectionError
from strawberry.types import Info

state = {"message": None}


@strawberry.type
class Query:
    @strawberry.field
    def hello(self, name: str = "world") -> str:
        return f"hello {name}"

    @strawberry.field
    def add(self, a: int, b: int) -> int:
        return a + b

    @strawberry.field
    def boom(self) -> typing.Optional[str]:
        raise Exception("boom went the field")

    @strawberry.field
    def token(self, info: Info) -> typing.Optional[str]:
        params = info.context.get("connection_params") or {}
        return params.get("token")

    @strawberry.field
    def message(self) -> typing.Optional[str]:
        return state["message"]


@strawberry.type
class Mutation:
    @strawberry.mutation
    def set_message(self, text: str) -> str:
        state["message"] = text
        return text


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def count(self, to: int, delay: float = 0.01) -> typing.AsyncGenerator[int, None]:
        for i in range(1, to + 1):
            yield i
            await asyncio.sleep(delay)

    @strawberry.subscription
    async def ticks(self, delay: float = 0.2) -> typing.AsyncGenerator[int, None]:
        i = 0
        while True:
            i += 1
            yield i
            await asyncio.sleep(delay)

    @strawberry.subscription
    async def failing(self, after: int) -> typing.AsyncGenerator[int, None]:
        for i in range(1, after + 1):
            yield i
        raise Exception("the subscription failed on purpose")

    @strawberry.subscription
    async def token(self, info: Info) -> typing.AsyncGenerator[typing.Optional[str], None]:
        params = info.context.get("connection_params") or {}
        yield params.get("token")


class View(GraphQLView):
    async def on_ws_connect(self, context):
        params = context.get("connection_params") or {}
        if params.get("token") == "bad":
            raise ConnectionRejectionError({"message": "bad token"})
        return None


schema = strawberry.Schema(query=Query, mutation=Mutation, subscription=Subscription)


async def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    app = web.Application()
    app.router.add_route("*", "/graphql", View(schema=schema, keep_alive=True, keep_alive_interval=0.5))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, reuse_address=True)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"READY {port}", flush=True)
    await asyncio.Future()


asyncio.run(main())
