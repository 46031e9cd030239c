-- The console codec of `connect`, `listen` and `replay` (--proto FILE --type NAME,
-- --msgpack, --cbor): binary messages shown decoded (as Lua values, mw.inspect's
-- text: exact integers, bytes escaped; MessagePack bin and ext and CBOR byte strings
-- and tags as the calls that make them, bin("\x00\x01"), ext(1, "..."),
-- bytes("..."), tagged(1, 1700000000), an empty array as array()), typed lines (JSON,
-- read exactly as mw.json reads it, or a Lua value constructor using those same
-- calls) encoded before they are sent.
-- Called with the chunks and native openers of mw.json, mw.msgpack/mw.cbor,
-- mw.protobuf and mw.inspect (a Lua state of its own, no prelude); returns
-- setup(format, files, import_paths, type) -> show, encode, value | nil, err, where
-- format is "protobuf", "msgpack" or "cbor", show(bytes) -> text | nil, err,
-- encode(line) -> bytes | nil, err and value(bytes) -> json | nil, err (the decoded
-- value as JSON text, which replay matches as a value; what JSON cannot hold, such as
-- a byte string, is a string there, the text show gives it).
local json_chunk, json_install, pack_install, protobuf_chunk, protobuf_open, inspect_chunk = ...
local json = json_install(json_chunk())
local array_mt, object_mt = getmetatable(json.array()), getmetatable(json.object())
local msgpack, cbor = pack_install(json)
local protobuf = protobuf_chunk(protobuf_open(array_mt, object_mt))
local inspect = inspect_chunk().inspect

-- Nesting shown before {...}: deep enough for any message a person reads.
local DEPTH = 100

-- An error raised by a codec, without the position error() put in front.
local function words(err)
  return (tostring(err):gsub("^[^:\n]*:%d+: ", ""))
end

local bytes_mt, ext_mt, tag_mt = getmetatable(msgpack.bin("")), getmetatable(msgpack.ext(0, "")), getmetatable(cbor.tagged(0, 0))

-- Text that mw.inspect shows as it is (a table with __tostring).
local function shown(text)
  return setmetatable({}, { __tostring = function() return text end })
end

-- A decoded MessagePack or CBOR value with its markers as the calls that make
-- them (the bytes marker's own tostring is the raw bytes).
local function readable(v, bytes_name)
  if type(v) ~= "table" or rawequal(v, json.null) then return v end
  local mt = getmetatable(v)
  if mt == bytes_mt then return shown(("%s(%s)"):format(bytes_name, inspect(v.data))) end
  if mt == ext_mt then return shown(("ext(%d, %s)"):format(v.type, inspect(v.data))) end
  if mt == tag_mt then
    return shown(("tagged(%s, %s)"):format(tostring(v.tag), inspect(readable(v.value, bytes_name), { depth = DEPTH })))
  end
  if mt == array_mt and next(v) == nil then return shown("array()") end
  local copy = {}
  for k, x in pairs(v) do copy[k] = readable(x, bytes_name) end
  return copy
end

-- A decoded value with what JSON cannot hold as strings: the markers as show writes
-- them (the calls that make them), and a string that is not UTF-8 (which mw.json
-- would write with U+FFFD in place of its bad bytes) as inspect quotes it. Arrays and
-- objects keep their kind.
local function plain(v, bytes_name)
  if type(v) == "string" then return utf8.len(v) and v or inspect(v) end
  if type(v) ~= "table" or rawequal(v, json.null) then return v end
  local mt = getmetatable(v)
  if mt == bytes_mt or mt == ext_mt or mt == tag_mt then return tostring(readable(v, bytes_name)) end
  local copy = {}
  for k, x in pairs(v) do copy[plain(k, bytes_name)] = plain(x, bytes_name) end
  return setmetatable(copy, mt == array_mt and array_mt or mt == object_mt and object_mt or nil)
end

local formats = {
  msgpack = {
    module = msgpack, name = "MessagePack", bytes = "bin",
    env = { null = json.null, array = json.array, object = json.object, bin = msgpack.bin, ext = msgpack.ext },
  },
  cbor = {
    module = cbor, name = "CBOR", bytes = "bytes",
    env = { null = json.null, array = json.array, object = json.object, bytes = cbor.bytes, tagged = cbor.tagged },
  },
}

-- The codec of one format: { decode, encode, name, env, tables_only, show_value }.
local function codec_of(format, files, import_paths, type_name)
  if format == "protobuf" then
    local ok, err = pcall(protobuf.load, files, { import_paths = import_paths })
    if not ok then return nil, words(err) end
    local codec
    ok, codec = pcall(protobuf.codec, type_name)
    if not ok then return nil, words(codec) end
    return {
      decode = codec.decode, encode = codec.encode, name = type_name, env = {}, tables_only = true,
      show_value = function(v) return v end, plain_value = function(v) return plain(v, "bytes") end,
    }
  end
  local f = formats[format]
  return {
    decode = f.module.decode, encode = f.module.encode, name = f.name, env = f.env,
    show_value = function(v) return readable(v, f.bytes) end,
    plain_value = function(v) return plain(v, f.bytes) end,
  }
end

return function(format, files, import_paths, type_name)
  local codec, why = codec_of(format, files, import_paths, type_name)
  if not codec then return nil, why end
  local expected = codec.tables_only and "a JSON object or a Lua table" or "a JSON value or a Lua value"

  local function show(bytes)
    local msg, err = codec.decode(bytes)
    if msg == nil then return nil, "decode: " .. tostring(err) end
    return inspect(codec.show_value(msg), { depth = DEPTH })
  end

  local function encode(line)
    local value, not_json = json.decode(line)
    if not_json ~= nil or (codec.tables_only and type(value) ~= "table") then
      -- A fresh environment each line: a line cannot change what the next one sees.
      local chunk = load("return " .. line, "=line", "t", setmetatable({}, { __index = codec.env }))
      local good, v = false, nil
      if chunk then good, v = pcall(chunk) end
      if not good or v == nil or (codec.tables_only and type(v) ~= "table") then
        return nil, ("%s: %s expected"):format(codec.name, expected)
      end
      value = v
    end
    local done, bytes = pcall(codec.encode, value)
    if not done then return nil, words(bytes) end
    return bytes
  end

  local function value(bytes)
    local msg, err = codec.decode(bytes)
    if msg == nil then return nil, "decode: " .. tostring(err) end
    local done, text = pcall(json.encode, codec.plain_value(msg))
    if not done then return nil, words(text) end
    return text
  end

  return show, encode, value
end
