-- A GraphQL-over-WebSocket server (mock) on require "moonwire.graphql_ws":
-- the script supplies a resolver per operation name; queries and mutations
-- return their result, subscriptions emit results until they return. Both
-- subprotocols are served (graphql-transport-ws and the legacy graphql-ws),
-- chosen by the client's offer; connection_init with token "bad" is refused.
--
--   moonwire run examples/graphql_ws_mock.lua [PORT]   (prints "READY <port>";
--   the endpoint is ws://127.0.0.1:PORT/graphql)
local gql = require "moonwire.graphql_ws"

local messages = {}
local server = assert(gql.listen("ws://127.0.0.1:" .. (mw.args[1] or "0") .. "/graphql", {
  ping_interval = 1, -- graphql-transport-ws clients get {"type":"ping"}, graphql-ws clients "ka"
  on_connect = function(payload)
    if payload.token == "bad" then return false, "bad token" end
  end,
  operations = {
    Hello = function(ctx) return { hello = "hello " .. (ctx.variables.name or "world") } end,
    Token = function(ctx) return { token = ctx.payload and ctx.payload.token or mw.json.null } end,
    Post = function(ctx)
      messages[#messages + 1] = ctx.variables.text
      return { post = #messages }
    end,
    Boom = function() error("boom went the resolver", 0) end,
    Count = function(ctx)
      for i = 1, ctx.variables.to do
        if not ctx.emit({ count = i }) then return end -- the client stopped it
        mw.sleep(0.01)
      end
    end,
  },
}))

print("READY " .. server:url():match(":(%d+)/"))
