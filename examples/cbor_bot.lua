-- cbor_bot.lua: a bot that speaks CBOR (RFC 8949). codec = "cbor" turns every
-- message into a Lua value and back (decoded from the frame's bytes and encoded
-- straight into a binary frame by the native mw.cbor): 64-bit integers stay exact,
-- byte strings stay bytes (mw.cbor.bytes), tags survive (mw.cbor.tagged), an empty
-- list stays a list (mw.cbor.array).
--   moonwire run examples/cbor_bot.lua ws://127.0.0.1:9000/    (an echo server)
local cbor = mw.cbor
local url = mw.args[1] or "ws://127.0.0.1:9000/"
local bot = mw.connect(url, { codec = "cbor" })

bot:on_open(function(c)
  c:send({
    op = "reading", sensor = cbor.bytes("\x0a\x0b\x0c"), seq = math.mininteger,
    at = cbor.tagged(1, 1700000000), values = cbor.array { 21.5, 0 / 0 }, none = cbor.array(),
  })
end)

bot:on_message(function(c, msg)
  print(("got %s: sensor %d bytes, seq %d, tag %d at %d, %d values (%s, %s), %d in none"):format(
    msg.op, #msg.sensor.data, msg.seq, msg.at.tag, msg.at.value, #msg.values, msg.values[1],
    msg.values[2] ~= msg.values[2] and "NaN" or msg.values[2], #msg.none))
  c:close()                                      -- deliberate: the script ends
end)

-- A message that is not CBOR reaches no on_message handler: it comes here, as
-- "decode: value...: <why> (byte B)", with the raw message.
bot:on_error(function(c, err, raw)
  print(err, raw and #raw)
end)

bot:on_close(function(c, code)
  print("closed " .. code)
end)
