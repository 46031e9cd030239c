-- json_bot.lua: a callback-driven bot. A codec turns every message into a Lua
-- table and back, so the handlers never see JSON text.
--   moonwire run examples/json_bot.lua ws://127.0.0.1:9000/
local url = mw.args[1] or "ws://127.0.0.1:9000/"
local bot = mw.connect(url, { codec = { encode = mw.json.encode, decode = mw.json.decode } })

bot:on_open(function(c)
  c:send({ op = "login", user = "ann" })        -- sent before anything queued
end)

bot:on_message(function(c, msg)
  print("got " .. msg.op)
  if msg.op == "login" then
    c:send({ op = "say", text = "hi" })
  else
    c:close()                                   -- deliberate: the script ends
  end
end)

bot:on_close(function(c, code)
  print("closed " .. code)
end)
