-- A GraphQL-over-WebSocket bot on require "moonwire.graphql_ws": negotiates
-- the subprotocol (graphql-transport-ws, else the legacy graphql-ws), sends
-- connection_init with a payload, runs a query and a mutation as one-shot
-- requests, reads a subscription as an iterator and another with a callback,
-- and shows a GraphQL error in words. The server's pings (graphql-transport-ws)
-- and keep-alives ("ka", graphql-ws) are handled by the module.
--
--   moonwire run examples/graphql_ws_bot.lua ws://127.0.0.1:8000/graphql [graphql-ws]
--   (or GRAPHQL_WS_URL=ws://127.0.0.1:8000/graphql moonwire run examples/graphql_ws_bot.lua)
local gql = require "moonwire.graphql_ws"

local url = mw.args[1] or os.getenv("GRAPHQL_WS_URL") or "ws://127.0.0.1:8000/graphql"
local client = gql.connect(url, { protocol = mw.args[2], payload = { token = "bot" }, reconnect = false })
assert(client:wait_ready(10))
print("speaking " .. client:protocol_name())

if client:protocol_name() == "graphql-transport-ws" then
  -- (Strawberry's legacy graphql-ws endpoint runs subscriptions only.)
  print("hello", assert(client:query('query Hello($name: String) { hello(name: $name) }', { name = "moonwire" })).hello)
  print("set", assert(client:mutation('mutation { setMessage(text: "from the bot") }')).setMessage)
end

-- A subscription as an iterator: the loop ends when the server completes it.
local sub = assert(client:subscribe("subscription { count(to: 3) }"))
for result in sub:results(5) do print("count", result.data.count) end

-- The same with a callback.
local seen = {}
local done = false
client:subscribe("subscription { count(to: 2) }", nil, {
  on_next = function(result) seen[#seen + 1] = result.data.count end,
  on_complete = function() done = true end,
})
while not done do mw.sleep(0.01) end
print("callback saw", table.concat(seen, ","))

-- A GraphQL error, in words.
local ok, err = pcall(function()
  for result in client:subscribe("subscription { failing(after: 1) }"):results(5) do
    if result.errors then error(gql.errors_text(result.errors), 0) end
  end
end)
print("error", ok, err)

client:close()
print("done")
