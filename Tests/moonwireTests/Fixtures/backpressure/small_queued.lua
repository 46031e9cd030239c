-- Small messages waiting for a stalled peer (several share one buffer in the queue):
-- every bound still counts them one by one. A server peer paused for a moment; the
-- client sends 200-byte numbered messages until the budget refuses one, then all it
-- accepted arrive in order and `sent` counts each. A second client to a peer that stays
-- paused: c:close() returns how many waited, and `dropped` counts them.
local s = assert(mw.listen("ws://127.0.0.1:0/"))
local peers = 0
local received, in_order = 0, true
s:on_connect(function(peer)
  peers = peers + 1
  peer:pause(peers == 1 and 0.5 or 30)
end)
s:on_message(function(_, msg)
  received = received + 1
  if string.unpack(">I4", msg) ~= received then in_order = false end
end)

local pad = string.rep("x", 196)
local function fill(c)
  local accepted = 0
  while true do
    local ok, err = c:send(string.pack(">I4", accepted + 1) .. pad, "binary")
    if not ok then return accepted, err end
    accepted = accepted + 1
  end
end

local c = mw.connect(s:url())
assert(c:wait_open(5))
local accepted, err = fill(c)
local queued = c:stats().queued
while received < accepted and c:state() == "open" do mw.sleep(0.01) end
local stats = c:stats()

local c2 = mw.connect(s:url())
assert(c2:wait_open(5))
local _, err2 = fill(c2)
local queued2 = c2:stats().queued
local closed = c2:close()

print(("err=%s queued=%d accepted=%d received=%d in_order=%s sent=%d dropped=%d err2=%s queued2=%d closed=%d dropped2=%d")
  :format(err:gsub(" ", "_"), queued, accepted, received, tostring(in_order), stats.sent, stats.dropped,
          err2:gsub(" ", "_"), queued2, closed, c2:stats().dropped))
mw.exit(0)
