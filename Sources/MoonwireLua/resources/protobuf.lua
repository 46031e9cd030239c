-- mw.protobuf: Protocol Buffers from .proto files loaded at run time.
--
-- The native module (Sources/CMoonProto) parses the files with Debian's
-- libprotobuf and encodes and decodes by walking their descriptors between the
-- wire bytes and Lua tables; this file is the thin Lua face over it: the
-- registry of loaded types, errors at the user's line, and the connection codecs.
-- docs/formats-protobuf.md describes the values.

local native, user_level = ...
-- Without the prelude (the fuzz target): levels as error() counts them.
user_level = user_level or function(level) return level end

local protobuf = {}

-- Every message type loaded so far: full name -> { schema, index }.
local types = {}
-- And every enum: full name -> { schema, index }.
local enums = {}
local native_encode, native_decode = native.encode, native.decode
-- The codecs of the plain form of protobuf.codec: codec table -> { schema, index }.
local plain_codecs = setmetatable({}, { __mode = "k" })

local function lookup(name, fname, level)
  if type(name) ~= "string" then
    error(("bad argument #1 to '%s' (message type name expected, got %s)"):format(fname, type(name)), user_level(level + 1))
  end
  local t = types[name] or types[name:match("^%.(.*)$") or ""]
  if not t then
    error(("%s: no message type '%s' (load its .proto file first with mw.protobuf.load)"):format(fname, name), user_level(level + 1))
  end
  return t
end

-- mw.protobuf.load(path or { paths }, { import_paths = { dirs } }) -> { type names }
-- Raises with the parser's file:line:column messages when a file does not load.
function protobuf.load(paths, opts)
  if type(paths) ~= "string" and type(paths) ~= "table" then
    error(("bad argument #1 to 'mw.protobuf.load' (path or list of paths expected, got %s)"):format(type(paths)), user_level(2))
  end
  if opts ~= nil and type(opts) ~= "table" then
    error(("bad argument #2 to 'mw.protobuf.load' (table expected, got %s)"):format(type(opts)), user_level(2))
  end
  local import_paths = opts and opts.import_paths
  if type(import_paths) == "string" then import_paths = { import_paths } end
  local ok, schema, messages, enum_names = pcall(native.load, paths, import_paths)
  if not ok then error("mw.protobuf.load: " .. tostring(schema), user_level(2)) end
  if not schema then error("mw.protobuf.load: " .. messages, user_level(2)) end
  local names = {}
  for name, index in pairs(messages) do
    types[name] = { schema, index }
    names[#names + 1] = name
  end
  for name, index in pairs(enum_names) do enums[name] = { schema, index } end
  table.sort(names)
  return names
end

-- mw.protobuf.enum(name) -> { value name -> number } of a loaded enum type.
function protobuf.enum(name)
  local t = type(name) == "string" and enums[name:match("^%.?(.*)$")]
  if not t then error(("mw.protobuf.enum: no enum type '%s'"):format(tostring(name)), user_level(2)) end
  return native.enum_values(t[1], t[2])
end

-- mw.protobuf.encode(type, table) -> bytes; a value that does not fit the schema
-- raises, naming the field: chat.Envelope.body.user_id: expected integer, got string "x"
function protobuf.encode(name, value)
  local t = lookup(name, "mw.protobuf.encode", 2)
  local bytes, err = native_encode(t[1], t[2], value)
  if not bytes then error(err, user_level(2)) end
  return bytes
end

-- mw.protobuf.decode(type, bytes) -> table | nil, err
function protobuf.decode(name, bytes)
  local t = lookup(name, "mw.protobuf.decode", 2)
  return native_decode(t[1], t[2], bytes)
end

-- The wire bytes of the fields of a decoded message its schema did not know
-- (encode writes them again), or nil.
protobuf.unknown = native.unknown

-- The fields of a message type: a list of { name, number, type, repeated, map, oneof }.
function protobuf.fields(name)
  local t = lookup(name, "mw.protobuf.fields", 2)
  return native.fields(t[1], t[2])
end

-- The names of every message type loaded, sorted.
function protobuf.types()
  local names = {}
  for name in pairs(types) do names[#names + 1] = name end
  table.sort(names)
  return names
end

-- The envelope form: the payload field's bytes are a message whose type a
-- second field names. `select` is that field; `types` maps its values to type
-- names (without it the value is the type name, or a URL ending in it, as in
-- google.protobuf.Any's type_url).
local function envelope(outer, name, opts)
  local by, payload, names = opts.select, opts.payload, opts.types
  if type(by) ~= "string" or type(payload) ~= "string" then
    error("bad argument #2 to 'mw.protobuf.codec' ({ select = field name, payload = field name, types = { value = type name } } expected)", user_level(3))
  end
  if names ~= nil and type(names) ~= "table" then
    error("bad argument #2 to 'mw.protobuf.codec' (types: a table of field value -> message type name expected)", user_level(3))
  end
  for _, tname in pairs(names or {}) do lookup(tname, "mw.protobuf.codec", 3) end
  local function inner_type(value)
    local tname
    if names then tname = names[value]
    elseif type(value) == "string" then tname = value:match("([^/]+)$") end
    local t = tname and types[tname]
    if not t then return nil, ("%s.%s: no message type for %s = %s"):format(name, by, by, tostring(value)) end
    return t, tname
  end
  local function decode(bytes)
    local msg, err = native_decode(outer[1], outer[2], bytes)
    if not msg then return nil, err end
    local t, tname = inner_type(msg[by])
    if not t then return nil, tname end
    local inner, ierr = native_decode(t[1], t[2], msg[payload] or "")
    if not inner then return nil, ("%s.%s (%s): %s"):format(name, payload, tname, ierr) end
    msg[payload] = inner
    return msg
  end
  local function encode(msg)
    if type(msg) ~= "table" then error(("%s: expected table, got %s"):format(name, type(msg)), user_level(2)) end
    local inner = msg[payload]
    if type(inner) == "table" then
      local t, tname = inner_type(msg[by])
      if not t then error(tname, user_level(2)) end
      local bytes, err = native_encode(t[1], t[2], inner)
      if not bytes then error(("%s.%s (%s): %s"):format(name, payload, tname, err), user_level(2)) end
      -- Swapped in for the outer encode and back, so the caller's table is unchanged.
      msg[payload] = bytes
      local out, oerr = native_encode(outer[1], outer[2], msg)
      msg[payload] = inner
      if not out then error(oerr, user_level(2)) end
      return out
    end
    local out, err = native_encode(outer[1], outer[2], msg)
    if not out then error(err, user_level(2)) end
    return out
  end
  return { encode = encode, decode = decode, protobuf = name, kind = "binary" }
end

-- mw.protobuf.codec(type [, { select =, payload =, types = }]): a codec for
-- mw.connect / mw.listen: c:send(table) sends the encoded bytes (binary
-- frames), messages arrive decoded, and one that does not decode is reported
-- (on_error, receive's nil, "decode: ...") instead of delivered.
function protobuf.codec(name, opts)
  local t = lookup(name, "mw.protobuf.codec", 2)
  if opts ~= nil then
    if type(opts) ~= "table" then
      error(("bad argument #2 to 'mw.protobuf.codec' (table expected, got %s)"):format(type(opts)), user_level(2))
    end
    return envelope(t, name, opts)
  end
  local schema, index = t[1], t[2]
  local codec = {
    encode = function(value)
      local bytes, err = native_encode(schema, index, value)
      if not bytes then error(err, user_level(2)) end
      return bytes
    end,
    decode = function(bytes) return native_decode(schema, index, bytes) end,
    protobuf = name,
    kind = "binary",
  }
  plain_codecs[codec] = t
  return codec
end

-- For the prelude: the schema and message index of a codec made by the plain
-- form above (a connection or server runs it in native code, as codec = "json"),
-- or nil for any other value.
local function native_type(codec)
  local t = plain_codecs[codec]
  if t then return t[1], t[2] end
end

return protobuf, native_type
