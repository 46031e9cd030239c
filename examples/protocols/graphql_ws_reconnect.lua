-- moonwire.graphql_ws keeps its subscriptions across a restart of the server:
-- run by scripts/protocols/graphql_ws.sh, which kills the Strawberry server once
-- this script printed "subscribed", and starts it again on the same port. The
-- module dials again, sends connection_init, re-subscribes with the same id,
-- says so in on_reconnect, and the loop goes on reading the new results.
--
--   moonwire run examples/protocols/graphql_ws_reconnect.lua ws://127.0.0.1:PORT/graphql [graphql-ws]
local gql = require "moonwire.graphql_ws"

local url = mw.args[1] or os.getenv("GRAPHQL_WS_URL") or "ws://127.0.0.1:8000/graphql"
local client = gql.connect(url, { protocol = mw.args[2], reconnect = { initial = 0.1, max = 0.5, attempts = 100 } })
local reconnected
client:on_reconnect(function(_, info)
  reconnected = info
  print(("reconnected: %s, %d subscription(s) sent again"):format(info.protocol, info.resubscribed))
end)
assert(client:wait_ready(10))

local sub = assert(client:subscribe("subscription { ticks(delay: 0.05) }"))
local before, after = 0, 0
for result in sub:results(30) do
  local n = result.data.ticks
  if not reconnected then
    before = before + 1
    if before == 3 then
      print("subscribed")
      io.stdout:flush()
    end
  else
    -- The server's generator starts again at 1 on the new connection.
    after = after + 1
    if after == 3 then
      print("ticks after the reconnect", n)
      sub:stop()
    end
  end
end
assert(reconnected and reconnected.resubscribed == 1, "the subscription was sent again")
local again = assert(client:subscribe("subscription { count(to: 2) }"))
for result in again:results(5) do print("a new subscription after the reconnect", result.data.count) end
client:close()
print("done")
