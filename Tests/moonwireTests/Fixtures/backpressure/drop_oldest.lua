-- drop_oldest: a tight loop (no yield) sends N messages to a paused peer; every send
-- is taken, the oldest queued ones are dropped and counted, the rest arrive in order.
local N = 3000
local s = assert(mw.listen("ws://127.0.0.1:0/"))
local received, last, in_order = 0, 0, true
s:on_connect(function(peer) peer:pause(0.5) end)
s:on_message(function(_, msg)
  received = received + 1
  local seq = string.unpack(">I4", msg)
  if seq <= last then in_order = false end
  last = seq
end)
local c = mw.connect(s:url(), { queue = { limit = 100, overflow = "drop_oldest" } })
assert(c:wait_open(5))
local payload = string.rep("y", 16 * 1024)
local refused = 0
for i = 1, N do
  if not c:send(string.pack(">I4", i) .. payload) then refused = refused + 1 end
end
local dropped = c:stats().dropped
while received + dropped < N and c:state() == "open" do mw.sleep(0.01) end
print(("refused=%d dropped=%d received=%d last=%d in_order=%s"):format(refused, dropped, received, last, tostring(in_order)))
mw.exit(0)
