-- formats_server.lua: a server that speaks MessagePack or CBOR, to try
-- `moonwire connect --msgpack` or `--cbor` on (docs/formats.md). With
-- codec = "msgpack" / "cbor" every message is a Lua value: a quote request
-- {"op":"quote","symbol":S} gets a quote whose id is a 64-bit integer, whose
-- signature is bytes and whose time is a MessagePack timestamp (ext -1) or a CBOR
-- epoch tag (1); anything else comes back as { echo = message }.
--   moonwire run examples/formats_server.lua msgpack ws://127.0.0.1:9000/
--   moonwire connect --msgpack ws://127.0.0.1:9000/
local format = mw.args[1] or "msgpack"
local url = mw.args[2] or "ws://127.0.0.1:9000/"
local codec = ({ msgpack = mw.msgpack, cbor = mw.cbor })[format]
if not codec then error("msgpack or cbor expected, got " .. format, 0) end
local bytes = codec.bin or codec.bytes
local AT = 1700000000

local server = assert(mw.listen(url, { codec = format }))
local quotes = 0

server:on_message(function(peer, msg)
  if type(msg) == "table" and msg.op == "quote" then
    quotes = quotes + 1
    peer:send({
      op = "quote", symbol = msg.symbol, id = math.maxinteger - quotes + 1, px = 91234.5,
      sig = bytes("\0\1\254\255"), fills = codec.array(),
      at = format == "cbor" and mw.cbor.tagged(1, AT) or mw.msgpack.ext(-1, string.pack(">I4", AT)),
    })
  else
    peer:send({ echo = msg })
  end
end)

print(server:url())
io.stdout:flush()
