-- `connect --proto` and `listen --proto`: received binary messages shown decoded
-- (as Lua tables, mw.inspect's text: exact integers, bytes escaped), typed lines
-- (a JSON object or a Lua table constructor) encoded before they are sent.
-- Called with the chunks and native openers of mw.protobuf, mw.json and mw.inspect
-- (a Lua state of its own, no prelude); returns setup(files, import_paths, type) ->
-- show, encode | nil, err, where show(bytes) -> text | nil, err and
-- encode(line) -> bytes | nil, err.
local protobuf_chunk, json_chunk, json_install, protobuf_open, inspect_chunk = ...
local json = json_install(json_chunk())
local protobuf = protobuf_chunk(protobuf_open(getmetatable(json.array()), getmetatable(json.object())))
local inspect = inspect_chunk()

-- An error raised by mw.protobuf, without the position error() put in front.
local function words(err)
  return (tostring(err):gsub("^[^:\n]*:%d+: ", ""))
end

return function(files, import_paths, type_name)
  local ok, err = pcall(protobuf.load, files, { import_paths = import_paths })
  if not ok then return nil, words(err) end
  local codec
  ok, codec = pcall(protobuf.codec, type_name)
  if not ok then return nil, words(codec) end

  local function show(bytes)
    local msg, why = codec.decode(bytes)
    if msg == nil then return nil, "decode: " .. why end
    return inspect.inspect(msg)
  end

  local function encode(line)
    local value = json.decode(line)
    if type(value) ~= "table" then
      local chunk = load("return " .. line, "=line", "t", {})
      local good, v = false, nil
      if chunk then good, v = pcall(chunk) end
      if not good or type(v) ~= "table" then
        return nil, ("%s: a JSON object or a Lua table expected"):format(type_name)
      end
      value = v
    end
    local done, bytes = pcall(codec.encode, value)
    if not done then return nil, words(bytes) end
    return bytes
  end

  return show, encode
end
