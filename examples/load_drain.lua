-- load_drain.lua: send as fast as the peer reads, and not faster.
--
-- c:send returns nil, "queue full" once the connection's send budget (queue.bytes,
-- 16 MiB by default) is full; c:drain() then waits until the peer has read half of
-- it. The loop below therefore runs at exactly the speed of the peer, with bounded
-- memory, even while the peer stalls (here: a server in the same script that stops
-- reading for half a second).
--   moonwire run examples/load_drain.lua [count]
local count = tonumber(mw.args[1]) or 2000
local payload = string.rep("x", 16 * 1024)

local s = assert(mw.listen("ws://127.0.0.1:0/"))
local received, in_order = 0, true
s:on_connect(function(peer) peer:pause(0.5) end)
s:on_message(function(peer, msg)
  received = received + 1
  if string.unpack(">I4", msg) ~= received then in_order = false end
end)

-- A small budget (1 MiB) so that the stall shows; drains fire at half of it.
local c = mw.connect(s:url(), { queue = { bytes = 1024 * 1024 } })
local drains = 0
c:on_drain(function() drains = drains + 1 end)
assert(c:wait_open(5))

local refused = 0
for i = 1, count do
  local message = string.pack(">I4", i) .. payload
  while true do
    local ok, err = c:send(message)
    if ok then break end
    assert(err == "queue full", err)
    refused = refused + 1
    assert(c:drain(10))          -- true once the peer read half the budget
  end
end

-- Everything accepted arrives, in order: wait until the server has it all.
while received < count do mw.sleep(0.01) end
local stats = c:stats()
print(("sent %d, received %d, in order: %s"):format(count, received, tostring(in_order)))
print(("budget reached: %s, drained: %s, dropped: %d")
  :format(tostring(refused > 0), tostring(drains > 0), stats.dropped))
c:close()
s:close()
