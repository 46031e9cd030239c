-- The file ends while its connections and servers are still closing (or still
-- open): the file's end closes them and waits, and nothing arrives late.
local server = assert(mw.listen("ws://127.0.0.1:0"))
server:on_message(function(peer, m) peer:send(m) end)
local kept = {}

it("leaves a connection open past its end", function()
  kept[#kept + 1] = mw.connect(server:url())
  assert(kept[#kept]:wait_open(5))
  kept[#kept]:send("late")
end)

it("closes one and does not wait", function()
  local c = mw.connect(server:url())
  assert(c:wait_open(5))
  c:send("x")
  c:close()
end)

it("opens a server of its own and a client of it", function()
  local s = assert(mw.listen("ws://127.0.0.1:0"))
  s:on_connect(function(peer) peer:send("welcome") end)
  local c = mw.connect(s:url())
  assert.are.equal("welcome", c:receive(5))
end)

-- Opened at the file's top level, never closed by a test: the file's end does it.
mw.connect(server:url()):send("from the top")
