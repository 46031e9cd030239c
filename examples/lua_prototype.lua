-- lua_prototype.lua: prototyping a message format at the moonwire lua prompt.
-- It starts an echo server of its own and connects to it through a codec,
-- then leaves you at the prompt with `c`: send a table, look at the answer,
-- change `codec` and reconnect, try again.
--   moonwire lua -i examples/lua_prototype.lua
--   > c:send({ op = "hello", n = 1 })
--   got	{ n = 1, op = "hello" }
-- luacheck: globals codec c reconnect (the prompt sees globals only, not this file's locals)
local server = assert(mw.listen("ws://127.0.0.1:0"))
server:on_message(function(peer, m) peer:send(m) end)

-- A format to try: JSON with a version field on every message.
codec = {
  encode = function(t) return mw.json.encode({ v = 1, body = t }) end,
  decode = function(s) return mw.json.decode(s).body end,
}

function reconnect()
  if c then c:close() end
  c = mw.connect(server:url(), { codec = codec })
  c:on_message(function(_, m) print("got", mw.inspect(m)) end)
  assert(c:wait_open(5))
end

reconnect()
print("connected to " .. server:url() .. "; try c:send({ op = \"hello\" })")
