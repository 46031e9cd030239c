-- chat_bot.lua: a bot for chat_server.lua. It logs in on every open (so a
-- reconnect logs in again), says something, and reports what it hears.
--   moonwire run examples/chat_bot.lua ws://127.0.0.1:9000/chat NAME
local url, name = mw.args[1] or "ws://127.0.0.1:9000/chat", mw.args[2] or "bot"
local bot = mw.connect(url, { codec = { encode = mw.json.encode, decode = mw.json.decode } })

bot:on_open(function(c)
  c:send({ op = "login", user = name })
end)

bot:on_message(function(c, msg)
  if msg.op == "welcome" then
    c:send({ op = "say", text = "hello from " .. name })
  elseif msg.op == "said" then
    print(("%s heard %s: %s"):format(name, msg.user, msg.text))
    if msg.user == name then c:close() end
  end
end)

return bot
