-- json_bot.lua: a callback-driven bot. codec = "json" turns every message into a
-- Lua table and back (decoded from the frame's bytes and encoded straight into the
-- outbound frame by the native mw.json), so the handlers never see JSON text.
--   moonwire run examples/json_bot.lua ws://127.0.0.1:9000/
local url = mw.args[1] or "ws://127.0.0.1:9000/"
local bot = mw.connect(url, { codec = "json" })

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

-- A message that is not JSON reaches no on_message handler: it comes here, as
-- "decode: <why> at line L column C (byte B)", with the raw message.
bot:on_error(function(c, err, raw)
  print(err, raw and #raw)
end)

bot:on_close(function(c, code)
  print("closed " .. code)
end)
