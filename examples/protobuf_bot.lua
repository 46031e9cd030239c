-- protobuf_bot.lua: a bot speaking Protocol Buffers, its schema loaded from
-- chat.proto when the script starts (no code generation, no recompiling).
-- codec = mw.protobuf.codec("chat.Envelope") makes every message a Lua table:
-- c:send(table) sends the encoded bytes in a binary frame, and handlers get
-- decoded tables.
--   moonwire run examples/protobuf_bot.lua ws://127.0.0.1:9000/chat
--   moonwire run examples/protobuf_bot.lua      (no URL: it serves itself)
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
mw.protobuf.load(here .. "chat.proto")
local codec = mw.protobuf.codec("chat.Envelope")

local url, server = mw.args[1], nil
if not url then
  -- The other side of the protocol, on loopback: welcomes a login, echoes a say.
  server = assert(mw.listen("ws://127.0.0.1:0/chat", { codec = codec }))
  server:on_message(function(peer, env)
    if env.login then
      peer:send({ id = env.id, welcome = { user = env.login.user, session = (1 << 62) + 1 } })
    elseif env.say then
      peer:send({ id = env.id, say = { text = "echo: " .. env.say.text, tags = env.say.tags } })
    end
  end)
  url = server:url()
end

local bot = mw.connect(url, { codec = codec })

bot:on_open(function(c)
  c:send({ id = 1, at = { seconds = os.time() }, login = { user = "ann" }, meta = { client = "moonwire" } })
end)

bot:on_message(function(c, env)
  if env.welcome then
    -- uint64 arrives as a Lua integer, exact: 4611686018427387905
    print(("welcome %s, session %d"):format(env.welcome.user, env.welcome.session))
    c:send({ id = 2, say = { text = "hi", tags = { "greeting" } } })
  elseif env.say then
    print(("got %q tagged %s"):format(env.say.text, table.concat(env.say.tags, ",")))
    c:close()
  end
end)

-- Bytes that are not a chat.Envelope reach no on_message handler: they come here
-- as "decode: chat.Envelope.<field>: <why> (at byte N)", with the raw message.
bot:on_error(function(c, err, raw)
  print(err, raw and #raw)
end)

bot:on_close(function()
  print("closed")
  if server then server:close() end
end)
