-- The protobuf fuzz target (scripts/fuzz.sh protobuf): mw.protobuf's decoder on
-- arbitrary bytes, as every message type of scripts/protobuf_diff's corpus (the
-- input's first byte picks the type).
--
-- Called once with mw.protobuf and the corpus directory; returns check(input), which
-- raises when mw.protobuf breaks a promise (the harness turns that into a crash):
--  * decode returns a table, or nil and an error in words that starts with the
--    type's name (the field path); it never raises;
--  * what it returns encodes (a proto2 message without its required field aside:
--    then the error says so) and decodes again to a table that encodes to the same
--    bytes: encode(decode(x)) is a fixed point.
local pb, dir = ...
pb.load({ dir .. "/corpus.proto", dir .. "/legacy.proto" }, { import_paths = { dir } })
local TYPES = { "corpus.Scalars", "corpus.Optionals", "corpus.Repeats", "corpus.Maps", "corpus.Tree",
  "corpus.Envelope", "corpus.Newer", "corpus.Older", "legacy.Legacy", "google.protobuf.Struct",
  "google.protobuf.Any", "google.protobuf.Timestamp" }

return function(input)
  local name = TYPES[(input:byte(1) or 0) % #TYPES + 1]
  local bytes = input:sub(2)
  local ok, msg, err = pcall(pb.decode, name, bytes)
  if not ok then error("decode raised: " .. tostring(msg)) end
  if msg == nil then
    if type(err) ~= "string" or err:sub(1, #name + 1) ~= name .. "." and err:sub(1, #name + 2) ~= name .. ": " then
      error("decode error not in words: " .. tostring(err))
    end
    return
  end
  local encoded, out = pcall(pb.encode, name, msg)
  if not encoded then
    if tostring(out):find("required field missing", 1, true) then return end
    error("a decoded " .. name .. " does not encode: " .. tostring(out))
  end
  local again = assert(pb.decode(name, out))
  local out2 = pb.encode(name, again)
  if out2 ~= out then error(name .. ": encode(decode(x)) is not a fixed point") end
end
