-- The rest of `mw` a script sees: mw.inspect and mw.hexdump, mw.log, mw.json,
-- and a print that writes each line in one piece.

local host, prelude = ...
local mw, describe = prelude.mw, prelude.describe

local inspect = host.inspect_module()
mw.inspect = inspect.inspect
prelude.set_inspect(inspect.inspect)
-- The C message handler prints an error value that is not a string with this,
-- not as "(error object is a table value)".
debug.getregistry()["moonwire.describe_error"] = function(value) return describe(value) end
mw.hexdump = inspect.hexdump

-- One log line from any values: a format string with % directives and its
-- arguments go through string.format; otherwise the values are joined by
-- spaces, strings as they are, tables through mw.inspect.
local function log_text(name, n, first, ...)
  if type(first) == "string" and n > 1 and first:find("%%[^%%]") then
    local ok, message = pcall(string.format, first, ...)
    if not ok then error(name .. ": " .. message, 3) end
    return message
  end
  local parts = { first, ... }
  for i = 1, n do
    local v = parts[i]
    if type(v) == "table" then parts[i] = inspect.inspect(v) else parts[i] = tostring(v) end
  end
  return table.concat(parts, " ", 1, n)
end

local function logger(level)
  local name = "mw.log." .. level
  return function(...)
    host.log(level, log_text(name, select("#", ...), ...))
  end
end

-- mw.log(...) logs at info; mw.log.debug/info/warn/error(...) at that level.
mw.log = setmetatable({
  debug = logger("debug"),
  info = logger("info"),
  warn = logger("warn"),
  error = logger("error"),
}, {
  __call = function(_, ...) host.log("info", log_text("mw.log", select("#", ...), ...)) end,
})

-- JSON that keeps integers exact and arrays apart from objects (json.lua says
-- why not lua-cjson).
mw.json = host.json_native(host.json_module())

-- MessagePack and CBOR in native code, with mw.json's null and array/object markers
-- (docs/formats.md).
mw.msgpack, mw.cbor = host.pack_native(mw.json)
-- Protocol Buffers from .proto files loaded at run time (protobuf.lua); decoded
-- repeated fields and maps carry mw.json's array and object marks. A codec of
-- mw.protobuf.codec(name) runs in native code on connections (protobuf_type gives
-- connections.lua its schema and message index).
mw.protobuf, prelude.protobuf_type = host.protobuf_module(
  host.protobuf_native(getmetatable(mw.json.array()), getmetatable(mw.json.object())), prelude.user_level)

-- Lua's own print writes each argument, the tabs and the newline separately;
-- workers (run --workers) share the process's stdout, so their lines could mix
-- mid-line. This one renders the line the same way and writes it in one piece.
local tostring, select, concat, write_line = tostring, select, table.concat, host.write_line
function print(...)
  local n = select("#", ...)
  local parts = { ... }
  for i = 1, n do parts[i] = tostring(parts[i]) end
  write_line(concat(parts, "\t", 1, n))
end
