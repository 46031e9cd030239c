-- msgpack_bot.lua: a bot that speaks MessagePack. codec = "msgpack" turns every
-- message into a Lua value and back (decoded from the frame's bytes and encoded
-- straight into a binary frame by the native mw.msgpack): 64-bit integers stay
-- exact, bytes stay bytes (mw.msgpack.bin), an empty list stays a list
-- (mw.msgpack.array), mw.msgpack.null is nil on the wire.
--   moonwire run examples/msgpack_bot.lua ws://127.0.0.1:9000/    (an echo server)
local msgpack = mw.msgpack
local url = mw.args[1] or "ws://127.0.0.1:9000/"
local bot = mw.connect(url, { codec = "msgpack" })

bot:on_open(function(c)
  c:send({
    op = "login", user = "ann", id = math.maxinteger,
    key = msgpack.bin("\0\1\2\255"), tags = msgpack.array(), note = msgpack.null,
  })
end)

bot:on_message(function(c, msg)
  if msg.op == "login" then
    print(("got login: id %d, key %d bytes, %d tags, note %s"):format(msg.id, #msg.key.data, #msg.tags,
      msg.note == msgpack.null and "null" or tostring(msg.note)))
    c:send({ op = "say", text = "hi", score = -0.0 })
  else
    print(("got %s: %s, score %s"):format(msg.op, msg.text, string.pack(">d", msg.score) == string.pack(">d", -0.0) and "-0.0" or msg.score))
    c:close()                                    -- deliberate: the script ends
  end
end)

-- A message that is not MessagePack reaches no on_message handler: it comes here,
-- as "decode: value...: <why> (byte B)", with the raw message.
bot:on_error(function(c, err, raw)
  print(err, raw and #raw)
end)

bot:on_close(function(c, code)
  print("closed " .. code)
end)
