-- mw.protobuf's half of scripts/protobuf_diff.sh (run by moonwire):
--   moonwire run diff.lua DIR CASES OUT
-- Reads Python's cases (diff.py gen): each must decode to the value Python
-- read and encode back to the bytes Python wrote. Then writes moonwire's own
-- random messages of every type to OUT for diff.py check.
local pb = mw.protobuf
local dir, cases_path, out_path = mw.args[1], mw.args[2], mw.args[3]
pb.load({ dir .. "/corpus.proto", dir .. "/legacy.proto" }, { import_paths = { dir } })

local function hex(s)
  return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end
local function unhex(h)
  return (h:gsub("..", function(x) return string.char(tonumber(x, 16)) end))
end

-- Field lists by type, and which type names are messages (the rest are enums).
local fields_of = {}
local function fields(tname)
  local f = fields_of[tname]
  if not f then
    f = {}
    for _, field in ipairs(pb.fields(tname)) do f[field.name] = field end
    fields_of[tname] = f
  end
  return f
end
local is_message = {}
for _, name in ipairs(pb.types()) do is_message[name] = true end
local SCALARS = { double = true, float = true, int32 = true, int64 = true, uint32 = true, uint64 = true,
  sint32 = true, sint64 = true, fixed32 = true, fixed64 = true, sfixed32 = true, sfixed64 = true,
  bool = true, string = true, bytes = true }

-- The canonical text diff.py's dump writes.
local dump
local function scalar(ftype, v)
  if is_message[ftype] then return dump(ftype, v) end
  if ftype == "bool" then return v and "true" or "false" end
  if ftype == "string" then return "s:" .. hex(v) end
  if ftype == "bytes" then return "b:" .. hex(v) end
  if ftype == "double" or ftype == "float" then return "f:" .. hex(string.pack("<d", v)) end
  if SCALARS[ftype] then return ("%d"):format(v) end
  return type(v) == "string" and v or ("%d"):format(v) -- an enum
end
function dump(tname, msg)
  local f = fields(tname)
  local names = {}
  for k in pairs(msg) do names[#names + 1] = k end
  table.sort(names)
  local parts = {}
  for _, name in ipairs(names) do
    local field, v = f[name], msg[name]
    if field.map then
      local entry = fields(field.type)
      local items = {}
      for k, x in pairs(v) do items[#items + 1] = scalar(entry.key.type, k) .. "=" .. scalar(entry.value.type, x) end
      table.sort(items)
      parts[#parts + 1] = name .. ":{" .. table.concat(items, ",") .. "}"
    elseif field.repeated then
      local items = {}
      for i, x in ipairs(v) do items[i] = scalar(field.type, x) end
      parts[#parts + 1] = name .. ":[" .. table.concat(items, ",") .. "]"
    else
      parts[#parts + 1] = name .. ":" .. scalar(field.type, v)
    end
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- Python's cases.
local count, failures = 0, 0
for line in io.lines(cases_path) do
  local tname, h, want_dump, want_hex = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$")
  count = count + 1
  local msg, err = pb.decode(tname, unhex(h))
  if not msg then
    failures = failures + 1
    print(("DECODE %s %s: %s"):format(tname, h, err))
  else
    local got = dump(tname, msg)
    local ok, bytes = pcall(pb.encode, tname, msg)
    if got ~= want_dump then
      failures = failures + 1
      print(("VALUE %s %s\n  python:   %s\n  moonwire: %s"):format(tname, h, want_dump, got))
    elseif not ok then
      failures = failures + 1
      print(("ENCODE %s %s: %s"):format(tname, h, bytes))
    elseif hex(bytes) ~= want_hex then
      failures = failures + 1
      print(("BYTES %s\n  python:   %s\n  moonwire: %s"):format(tname, want_hex, hex(bytes)))
    end
  end
end
print(("diff.lua: %d Python encodings read by moonwire, %d differ"):format(count, failures))

-- moonwire's own random messages.
math.randomseed(43)
local function pick(list) return list[math.random(#list)] end
local INT_EDGES = {
  int32 = { 0, 1, -1, 2147483647, -2147483648, 300 }, sint32 = { 0, -1, 2147483647, -2147483648, 64 },
  sfixed32 = { 0, -1, 2147483647, -2147483648 }, uint32 = { 0, 1, 4294967295, 128 }, fixed32 = { 0, 4294967295, 7 },
  int64 = { 0, -1, math.maxinteger, math.mininteger, 1 << 53 }, sint64 = { 0, -1, math.maxinteger, math.mininteger },
  sfixed64 = { 0, math.maxinteger, math.mininteger }, uint64 = { 0, -1, math.mininteger, 1 << 40 },
  fixed64 = { 0, -1, math.mininteger, 12345 },
}
local DOUBLES = { 0.0, -0.0, 1 / 0, -1 / 0, 0 / 0, 1.5, -2.25, 1e308, 5e-324 }
local FLOATS = { 0.0, -0.0, 1 / 0, -1 / 0, 0 / 0, 1.5, 3.4028234663852886e38, 1.401298464324817e-45 }
local TEXT = { "", "a", "héllo", "中文", "😀", "\0", "quote\"back\\slash", "\n\t" }
local enum_names = {}
local function rand_scalar(ftype)
  if INT_EDGES[ftype] then
    if math.random() < 0.5 then return pick(INT_EDGES[ftype]) end
    local v = math.random(math.mininteger, math.maxinteger)
    if ftype == "int32" or ftype == "sint32" or ftype == "sfixed32" then v = (v & 0xFFFFFFFF) - (1 << 31) end
    if ftype == "uint32" or ftype == "fixed32" then v = v & 0xFFFFFFFF end
    return v
  end
  if ftype == "bool" then return math.random() < 0.5 end
  if ftype == "double" then return math.random() < 0.5 and pick(DOUBLES) or (math.random() - 0.5) * 1e6 end
  if ftype == "float" then
    local x = math.random() < 0.5 and pick(FLOATS) or (math.random() - 0.5) * 1e6
    return (string.unpack("<f", string.pack("<f", x)))
  end
  if ftype == "string" then return pick(TEXT) .. pick(TEXT) end
  if ftype == "bytes" then
    local n, t = pick({ 0, 1, 7, 40 }), {}
    for i = 1, n do t[i] = string.char(math.random(0, 255)) end
    return table.concat(t)
  end
  local names = enum_names[ftype]
  if not names then
    names = {}
    for name in pairs(pb.enum(ftype)) do names[#names + 1] = name end
    table.sort(names)
    enum_names[ftype] = names
  end
  return pick(names)
end

local function rand_message(tname, depth)
  local msg, chosen = {}, {}
  local list = pb.fields(tname)
  for _, field in ipairs(list) do
    if field.oneof and chosen[field.oneof] == nil then chosen[field.oneof] = math.random() < 0.8 and pick(list) or false end
  end
  for _, field in ipairs(list) do
    local skip = math.random() < 0.3 or (field.oneof and chosen[field.oneof] ~= field)
    if tname == "legacy.Legacy" and field.name == "id" then skip = false end
    if not skip then
      local ftype = field.type
      if field.map then
        local entry = fields(ftype)
        local m = {}
        for _ = 1, pick({ 0, 1, 3 }) do
          local k = rand_scalar(entry.key.type)
          if is_message[entry.value.type] then
            if depth < 3 then m[k] = rand_message(entry.value.type, depth + 1) end
          else
            m[k] = rand_scalar(entry.value.type)
          end
        end
        msg[field.name] = m
      elseif field.repeated then
        local list_value = {}
        for i = 1, pick({ 0, 1, 2, 5 }) do
          if is_message[ftype] then
            if depth < 3 then list_value[#list_value + 1] = rand_message(ftype, depth + 1) end
          else
            list_value[i] = rand_scalar(ftype)
          end
        end
        msg[field.name] = list_value
      elseif is_message[ftype] then
        if depth < 3 then msg[field.name] = rand_message(ftype, depth + 1) end
      else
        msg[field.name] = rand_scalar(ftype)
      end
    end
  end
  return msg
end

local TYPES = { "corpus.Scalars", "corpus.Optionals", "corpus.Repeats", "corpus.Maps", "corpus.Tree",
  "corpus.Envelope", "corpus.Newer", "legacy.Legacy", "google.protobuf.Struct", "google.protobuf.Timestamp",
  "google.protobuf.Any" }
local out = assert(io.open(out_path, "w"))
local written = 0
for _, tname in ipairs(TYPES) do
  for _ = 1, 60 do
    local bytes = pb.encode(tname, rand_message(tname, 0))
    out:write(tname, "\t", hex(bytes), "\t", dump(tname, assert(pb.decode(tname, bytes))), "\n")
    written = written + 1
  end
end
out:close()
print(("diff.lua: %d moonwire encodings written"):format(written))
if failures > 0 then mw.exit(1) end
