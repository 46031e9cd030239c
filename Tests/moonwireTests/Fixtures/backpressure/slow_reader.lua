-- 100 000 messages to a client that does not read until the server saw the
-- backpressure, then reads with pauses: none lost, in order.
local N = 100000
local s = assert(mw.listen("ws://127.0.0.1:0/"))
local refused, sender_done = 0, false
s:on_connect(function(peer)
  mw.spawn(function()
    local pad = string.rep("p", 508)
    for i = 1, N do
      local m = string.pack(">I4", i) .. pad
      while true do
        local ok, err = peer:send(m)
        if ok then break end
        assert(err == "queue full", err)
        refused = refused + 1
        assert(peer:drain(60))
      end
    end
    sender_done = true
  end)
end)
local c = mw.connect(s:url())
assert(c:wait_open(5))
while refused == 0 do mw.sleep(0.01) end     -- the client's inbox is full, its socket paused
local got, in_order = 0, true
while got < N do
  local msg = c:receive(30)
  if not msg then break end
  got = got + 1
  if string.unpack(">I4", msg) ~= got then in_order = false end
  if got % 20000 == 0 then mw.sleep(0.05) end
end
print(("received=%d in_order=%s refused=%d sender_done=%s dropped=%d")
  :format(got, tostring(in_order), refused, tostring(sender_done), c:stats().dropped))
mw.exit(0)
