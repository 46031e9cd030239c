-- mw.inspect and mw.hexdump: values and bytes made readable, for scripts and
-- for mw.log. Loaded once per Lua state by the prelude; returns a table with
-- both functions.

local type, pairs, tostring, getmetatable, rawget = type, pairs, tostring, getmetatable, rawget
local format, byte, concat, sort, rep = string.format, string.byte, table.concat, table.sort, string.rep
local math_type = math.type

local M = {}

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r" }
local function escape(c) return escapes[c] or format("\\x%02x", byte(c)) end

-- Valid UTF-8 text prints as is; other bytes (binary messages) as \xNN.
local function quote_string(s)
  local unsafe = utf8.len(s) and '[%c"\\]' or '[%c"\\\128-\255]'
  return '"' .. s:gsub(unsafe, escape) .. '"'
end

local function is_identifier(k)
  return type(k) == "string" and k:find("^[%a_][%w_]*$") ~= nil
end

local type_order = { number = 1, string = 2, boolean = 3, table = 4, ["function"] = 5, userdata = 6, thread = 7 }

local function key_less(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return (type_order[ta] or 9) < (type_order[tb] or 9) end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local function scalar(v)
  local t = type(v)
  if t == "string" then return quote_string(v) end
  if t == "number" then
    if math_type(v) == "float" and v == v and v ~= math.huge and v ~= -math.huge then
      local s = format("%.17g", v)
      for digits = 14, 16 do
        local short = format("%." .. digits .. "g", v)
        if tonumber(short) == v then s = short break end
      end
      if not s:find("[%.eEn]") then s = s .. ".0" end
      return s
    end
    return tostring(v)
  end
  return tostring(v)
end

local WIDTH = 80

local function render(v, depth, opts, path, ids)
  if type(v) ~= "table" then return scalar(v) end
  local meta = getmetatable(v)
  if meta and rawget(meta, "__tostring") then return tostring(v) end
  if path[v] then
    return "<cycle: table " .. ids[v] .. ">"
  end
  if depth >= opts.depth then return "{...}" end
  if not ids[v] then
    ids.n = ids.n + 1
    ids[v] = ids.n
  end
  path[v] = true
  local parts = {}
  local n = #v
  for i = 1, n do parts[#parts + 1] = render(v[i], depth + 1, opts, path, ids) end
  local keys = {}
  for k in pairs(v) do
    if not (math_type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  sort(keys, key_less)
  for _, k in ipairs(keys) do
    local name = is_identifier(k) and k or "[" .. render(k, depth + 1, opts, path, ids) .. "]"
    parts[#parts + 1] = name .. " = " .. render(v[k], depth + 1, opts, path, ids)
  end
  path[v] = nil
  if #parts == 0 then return "{}" end
  local line = "{ " .. concat(parts, ", ") .. " }"
  if #line + depth * 2 <= WIDTH and not line:find("\n", 1, true) then return line end
  local indent = rep("  ", depth + 1)
  return "{\n" .. indent .. concat(parts, ",\n" .. indent) .. "\n" .. rep("  ", depth) .. "}"
end

-- inspect(value [, { depth = n }]) -> text. Tables show their list items, then
-- their other keys sorted; a table met again inside itself is shown as
-- <cycle: table N>; tables nested deeper than `depth` (default 10) as {...}.
function M.inspect(v, opts)
  local depth = 10
  if opts ~= nil then
    if type(opts) ~= "table" then
      -- mw.inspect(c:receive()) passes the message's kind on as opts: say so.
      local hint = (opts == "text" or opts == "binary")
        and "; c:receive, c:expect and c:request return the message and its kind: mw.inspect((c:expect(...))) keeps the message only" or ""
      error(("bad argument #2 to 'mw.inspect' (table expected, got %s%s)"):format(type(opts), hint), 2)
    end
    for k, value in pairs(opts) do
      if k ~= "depth" then
        error(("bad argument #2 to 'mw.inspect' (unknown option 'opts.%s')"):format(tostring(k)), 2)
      end
      if math_type(value) ~= "integer" or value < 1 then
        error("bad argument #2 to 'mw.inspect' (opts.depth: integer of at least 1 expected)", 2)
      end
      depth = value
    end
  end
  return render(v, 0, { depth = depth }, {}, { n = 0 })
end

-- hexdump(bytes) -> text: offset, 16 bytes in hex, and the printable ones.
--   00000000  68 65 6c 6c 6f 0a                                 |hello.|
function M.hexdump(s)
  if type(s) ~= "string" then
    error(("bad argument #1 to 'mw.hexdump' (string expected, got %s)"):format(type(s)), 2)
  end
  local lines = {}
  for offset = 1, #s, 16 do
    local chunk = s:sub(offset, offset + 15)
    local hex = {}
    for i = 1, #chunk do
      hex[i] = format("%02x", byte(chunk, i))
      if i == 8 then hex[i] = hex[i] .. " " end
    end
    local text = chunk:gsub("[^\32-\126]", ".")
    lines[#lines + 1] = format("%08x  %-49s |%s|", offset - 1, concat(hex, " "), text)
  end
  return concat(lines, "\n")
end

return M
