-- send_budget_process.lua: the process-wide send budget, on top of each connection's own.
--
-- Each connection has its own budget (queue.bytes); all connections together stay under
-- the process's (--send-budget, or mw.limits { send_budget = B } when the command line
-- did not choose; a quarter of the machine's memory, at most 1 GiB, by default). Here
-- 8 connections to a server in the same script that stops reading for half a second
-- each send 6 MiB: their own budgets (4 MiB each) never fill, the process's (2 MiB) does.
-- send then returns nil, "queue full (process send budget 2 MiB)"; c:drain() waits
-- until the process's budget is back under half; every message taken arrives.
--   moonwire run examples/send_budget_process.lua [connections] [messages]
mw.limits { send_budget = 2 * 1024 * 1024 }
local connections = tonumber(mw.args[1]) or 8
local count = tonumber(mw.args[2]) or 400
local payload = string.rep("x", 16 * 1024)

local s = assert(mw.listen("ws://127.0.0.1:0/"))
local received, in_order, next_of = 0, true, {}
s:on_connect(function(peer) peer:pause(0.5) end)
s:on_message(function(peer, msg)
  received = received + 1
  local n = string.unpack(">I4", msg)
  if n ~= (next_of[peer] or 1) then in_order = false end
  next_of[peer] = n + 1
end)

local refused, words, dropped, finished = 0, nil, 0, 0
for _ = 1, connections do
  mw.spawn(function()
    local c = mw.connect(s:url(), { queue = { bytes = 4 * 1024 * 1024 } })
    assert(c:wait_open(5))
    for i = 1, count do
      local message = string.pack(">I4", i) .. payload
      while true do
        local ok, err = c:send(message)
        if ok then break end
        assert(err:match("^queue full"), err)   -- what a script matching the own budget's words sees too
        refused, words = refused + 1, err
        assert(c:drain(10))                    -- until the process's budget is under half
      end
    end
    dropped = dropped + c:stats().dropped
    finished = finished + 1
  end)
end

-- Everything taken arrives, in order per connection.
while finished < connections or received < connections * count do mw.sleep(0.01) end
print(("connections %d, sent %d, received %d, in order: %s, dropped: %d"):format(
  connections, connections * count, received, tostring(in_order), dropped))
print(("refused: %s (%s), budget: %d"):format(tostring(refused > 0), words, mw.limits().send_budget))
mw.exit(0)
