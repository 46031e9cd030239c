-- The lua-msgpack and lua-cbor fuzz targets (scripts/fuzz.sh): mw.msgpack or mw.cbor
-- on the raw input.
--
-- Called once with the codec's module; returns check(input), which raises when the
-- codec breaks a promise (the harness turns that into a crash):
--  * decode(input) returns a value, or nil and an error in words ("value...: ...
--    (byte N)"), and never raises; with { bytes = "string" } too;
--  * a value it returns encodes, and that encoding decodes and encodes again to the
--    same bytes (the encoding is canonical: one value, one encoding).
local codec = ...
local decode, encode = codec.decode, codec.encode
local find = string.find

local function decoded(input, opts)
  local ok, value, err = pcall(decode, input, opts)
  if not ok then error("decode raised: " .. tostring(value)) end
  if value == nil then
    if type(err) ~= "string" or not find(err, "^value.*: .* %(byte %d+%)$") then
      error("decode failed without an error in words: " .. tostring(err))
    end
  end
  return value
end

return function(input)
  decoded(input, { bytes = "string" })
  local value = decoded(input)
  if value == nil then return end
  local ok, first = pcall(encode, value)
  if not ok then error("a decoded value does not encode: " .. tostring(first)) end
  local again = decoded(first)
  if again == nil then error("an encoding does not decode") end
  local ok2, second = pcall(encode, again)
  if not ok2 then error("a decoded encoding does not encode: " .. tostring(second)) end
  if second ~= first then error("encode(decode(encode(v))) differs from encode(v)") end
end
