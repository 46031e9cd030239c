-- scripts/formats/diff.py's moonwire side: every message of a file (one hex line
-- each) decoded by mw.msgpack or mw.cbor and encoded again; one line out per line in:
-- "V <hex>" (the encoding), "E <error>" (decode refused it) or "X <error>" (encode did).
--   moonwire run scripts/formats/roundtrip.lua msgpack|cbor FILE
local format, path = mw.args[1], mw.args[2]
local codec = assert(mw[format], "msgpack or cbor expected")
local out = {}
for line in io.lines(path) do
  local bytes = line:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
  local value, err = codec.decode(bytes)
  if value == nil then
    out[#out + 1] = "E " .. tostring(err):gsub("\n", " ")
  else
    local ok, encoded = pcall(codec.encode, value)
    if ok then
      out[#out + 1] = "V " .. encoded:gsub(".", function(c) return ("%02x"):format(c:byte()) end)
    else
      out[#out + 1] = "X " .. tostring(encoded):gsub("\n", " ")
    end
  end
end
io.write(table.concat(out, "\n"), "\n")
