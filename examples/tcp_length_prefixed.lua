-- tcp_length_prefixed.lua: raw TCP with a 4-byte big-endian length header on
-- each message, both ways. Messages come out whole however TCP splits or glues
-- them (the "sticky packet" problem is the framing's job, not the script's).
--   moonwire run examples/tcp_length_prefixed.lua
local framing = { length = 4, endian = "big", max = 1024 * 1024 }
local server = assert(mw.listen("tcp://127.0.0.1:0", { framing = framing }))
server:on_message(function(peer, msg)
  local id, text = string.unpack(">I4s2", msg)
  peer:send(string.pack(">I4s2", id, text:upper()))
end)

local c = mw.connect(server:url(), { framing = framing, reconnect = false })
for id, word in ipairs({ "alpha", "beta", "gamma" }) do
  c:send(string.pack(">I4s2", id, word))
end
for _ = 1, 3 do
  local reply = assert(c:receive(2))
  local id, text = string.unpack(">I4s2", reply)
  print(id, text)
end
c:close()
server:close()
