-- TCP: send to a paused peer until the budget refuses, drain, then everything that
-- was accepted arrives in order.
local s = assert(mw.listen("tcp://127.0.0.1:0", { framing = { length = 4 } }))
local received, in_order = 0, true
s:on_connect(function(peer) peer:pause(0.5) end)
s:on_message(function(_, msg)
  received = received + 1
  if string.unpack(">I4", msg) ~= received then in_order = false end
end)
local c = mw.connect(s:url(), { framing = { length = 4 }, queue = { bytes = 256 * 1024 } })
assert(c:wait_open(5))
local payload = string.rep("z", 1020)
local accepted, err = 0, nil
while true do
  local ok, e = c:send(string.pack(">I4", accepted + 1) .. payload)
  if not ok then err = e break end
  accepted = accepted + 1
end
local at_refusal = c:stats()
local drained = c:drain(30)
for _ = 1, 100 do
  assert(c:send(string.pack(">I4", accepted + 1) .. payload))
  accepted = accepted + 1
end
while received < accepted and c:state() == "open" do mw.sleep(0.01) end
print(("err=%s queued=%d buffered=%d drained=%s accepted=%d received=%d in_order=%s")
  :format((err:gsub(" ", "_")), at_refusal.queued, at_refusal.buffered, tostring(drained), accepted, received, tostring(in_order)))
mw.exit(0)
