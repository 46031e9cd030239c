-- mw.json: JSON that keeps Lua 5.4's numbers as they are.
--
-- Debian's lua-cjson (2.1.0) decodes every number as a float (9007199254740993
-- comes back as 9007199254740992.0) and writes floats with 14 digits, so a
-- 64-bit id or a large float does not survive a round trip. Here:
--  * an integer literal decodes as a Lua integer (64-bit exact; one that does
--    not fit in 64 bits decodes as a float), anything with a fraction or an
--    exponent as a float;
--  * integers encode as integers, floats with the fewest digits that read back
--    to the same float, an integer-valued float with ".0" (so 2^53 is written
--    9007199254740992.0, not 9.007199254741e+15);
--  * JSON null is mw.json.null; an empty table encodes as {} unless marked
--    with mw.json.array; decoded arrays and objects keep their kind, so
--    encode(decode(text)) gives back [] and {};
--  * encode(value, { pretty = true }) indents by two spaces and sorts keys
--    (`indent = "\t"` picks the indent; `sort_keys = true` sorts compact output).
--
-- Loaded once per Lua state by the prelude, which puts the native encode and
-- decode (Sources/CMoonJSON) in place of these; this decode stays as their
-- reference for input RapidJSON rejects. Returns the mw.json table. Called with
-- a value, uses it as null (the tests and the fuzz target load a second copy
-- that shares mw.json.null).

local type, pairs, next, tostring, tonumber = type, pairs, next, tostring, tonumber
local math_type, floor, huge = math.type, math.floor, math.huge
local format, byte, char, sub, find, gsub, concat, sort = string.format, string.byte, string.char, string.sub, string.find,
  string.gsub, table.concat, table.sort
local utf8_char = utf8.char
local getmetatable, setmetatable, error, ipairs = getmetatable, setmetatable, error, ipairs

local MAX_DEPTH = 500

local json = {}

local null = ... or setmetatable({}, {
  __name = "mw.json.null",
  __tostring = function() return "null" end,
  __newindex = function() error("mw.json.null is read-only", 2) end,
})
json.null = null

local array_mt = { __jsontype = "array" }
local object_mt = { __jsontype = "object" }

-- Marks `t` (a new table if nil) to encode as a JSON array, even when empty.
function json.array(t)
  if t == nil then t = {} end
  if type(t) ~= "table" then error(("bad argument #1 to 'mw.json.array' (table expected, got %s)"):format(type(t)), 2) end
  return setmetatable(t, array_mt)
end

-- Marks `t` (a new table if nil) to encode as a JSON object, even when empty.
function json.object(t)
  if t == nil then t = {} end
  if type(t) ~= "table" then error(("bad argument #1 to 'mw.json.object' (table expected, got %s)"):format(type(t)), 2) end
  return setmetatable(t, object_mt)
end

-- Encoding ------------------------------------------------------------------

local escapes = {
  ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t",
}
for i = 0, 31 do
  local c = char(i)
  if not escapes[c] then escapes[c] = format("\\u%04x", i) end
end
escapes["\127"] = "\\u007f"

local function quote(s)
  if find(s, '[%c"\\]') then s = gsub(s, '[%c"\\]', escapes) end
  return '"' .. s .. '"'
end

local function number_text(x, path)
  if math_type(x) == "integer" then return format("%d", x) end
  if x ~= x or x == huge or x == -huge then
    error(("%s: %s cannot be written as JSON"):format(path, x ~= x and "NaN" or x > 0 and "inf" or "-inf"), 0)
  end
  if x == floor(x) and x > -1e16 and x < 1e16 then return format("%.1f", x) end
  for digits = 15, 16 do
    local s = format("%." .. digits .. "g", x)
    if tonumber(s) == x then return s end
  end
  local s = format("%.17g", x)
  -- %.17g writes a float from 1e16 to 1e17 digit by digit, with neither a point nor an
  -- exponent: it would read back as an integer.
  if find(s, "^-?%d+$") then s = s .. ".0" end
  return s
end

-- "array" for a sequence 1..n (or a table marked by mw.json.array), else
-- "object"; a sparse list is an error rather than a guess.
local function kind_of(t, path)
  local meta = getmetatable(t)
  local declared = meta and meta.__jsontype
  if declared then return declared end
  if next(t) == nil then return "object" end
  local n, max = 0, 0
  for key in pairs(t) do
    if math_type(key) ~= "integer" or key < 1 then return "object" end
    n = n + 1
    if key > max then max = key end
  end
  if n == max then return "array" end
  error(("%s: a sparse list (%d items up to index %d) cannot be written as JSON; use mw.json.null for missing items")
    :format(path, n, max), 0)
end

local encode_value

local function encode_table(t, out, path, depth, opts, seen)
  if seen[t] then error(("%s: a table that contains itself cannot be written as JSON"):format(path), 0) end
  if depth > MAX_DEPTH then error(("%s: nested more than %d levels deep"):format(path, MAX_DEPTH), 0) end
  seen[t] = true
  local indent = opts.indent
  local inner, close
  if indent then
    inner = "\n" .. indent:rep(depth + 1)
    close = "\n" .. indent:rep(depth)
  end
  if kind_of(t, path) == "array" then
    local n = #t
    if n == 0 then
      out[#out + 1] = "[]"
    else
      out[#out + 1] = "["
      for i = 1, n do
        if i > 1 then out[#out + 1] = "," end
        if inner then out[#out + 1] = inner end
        encode_value(t[i], out, path .. "[" .. i .. "]", depth + 1, opts, seen)
      end
      if close then out[#out + 1] = close end
      out[#out + 1] = "]"
    end
  else
    local keys, original = {}, {}
    for k in pairs(t) do
      local kt, name = type(k), k
      if kt == "number" then
        name = number_text(k, path)
      elseif kt ~= "string" then
        error(("%s: a %s key cannot be written as JSON"):format(path, kt), 0)
      end
      keys[#keys + 1] = name
      original[name] = k
    end
    if opts.sort_keys then sort(keys) end
    if #keys == 0 then
      out[#out + 1] = "{}"
    else
      out[#out + 1] = "{"
      local colon = indent and ": " or ":"
      for i, name in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        if inner then out[#out + 1] = inner end
        out[#out + 1] = quote(name)
        out[#out + 1] = colon
        encode_value(t[original[name]], out, path .. "." .. name, depth + 1, opts, seen)
      end
      if close then out[#out + 1] = close end
      out[#out + 1] = "}"
    end
  end
  seen[t] = nil
end

encode_value = function(v, out, path, depth, opts, seen)
  local t = type(v)
  if t == "string" then
    out[#out + 1] = quote(v)
  elseif t == "number" then
    out[#out + 1] = number_text(v, path)
  elseif t == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif v == null or v == nil then
    out[#out + 1] = "null"
  elseif t == "table" then
    encode_table(v, out, path, depth, opts, seen)
  else
    error(("%s: a %s cannot be written as JSON"):format(path, t), 0)
  end
end

local COMPACT = {}

-- encode(value [, { pretty = bool, indent = string, sort_keys = bool }]) -> text
function json.encode(value, opts)
  local settings = COMPACT
  if opts ~= nil then
    if type(opts) ~= "table" then
      error(("bad argument #2 to 'mw.json.encode' (table expected, got %s)"):format(type(opts)), 2)
    end
    settings = {}
    for k, v in pairs(opts) do
      if k == "pretty" or k == "sort_keys" then
        if type(v) ~= "boolean" then
          error(("bad argument #2 to 'mw.json.encode' (opts.%s: boolean expected, got %s)"):format(k, type(v)), 2)
        end
      elseif k == "indent" then
        if type(v) ~= "string" or not find(v, "^[ \t]*$") then
          error(("bad argument #2 to 'mw.json.encode' (opts.indent: spaces or tabs expected, got %s)"):format(type(v)), 2)
        end
      else
        error(("bad argument #2 to 'mw.json.encode' (unknown option 'opts.%s')"):format(tostring(k)), 2)
      end
    end
    if opts.pretty or opts.indent then
      settings.indent = opts.indent or "  "
      settings.sort_keys = opts.sort_keys ~= false
    else
      settings.sort_keys = opts.sort_keys
    end
  end
  local out = {}
  local ok, err = pcall(encode_value, value, out, "value", 0, settings, {})
  if not ok then error("mw.json.encode: " .. tostring(err), 2) end
  return concat(out)
end

-- Decoding ------------------------------------------------------------------

local unescape = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }

local function fail(text, pos, what)
  local line, column = 1, pos
  for nl in text:sub(1, pos - 1):gmatch("()\n") do
    line = line + 1
    column = pos - nl
  end
  error(("%s at line %d column %d (byte %d)"):format(what, line, column, pos), 0)
end

local function skip(text, pos)
  return find(text, "[^ \t\r\n]", pos) or #text + 1
end

local decode_value

local function decode_string(text, pos)
  -- pos is just after the opening quote
  local parts, n = nil, 0
  local start = pos
  while true do
    local at = find(text, '["\\%c]', pos)
    if not at then fail(text, start - 1, "unterminated string") end
    local c = byte(text, at)
    if c == 34 then -- "
      local piece = sub(text, pos, at - 1)
      if not parts then return piece, at + 1 end
      n = n + 1
      parts[n] = piece
      return concat(parts, "", 1, n), at + 1
    elseif c == 92 then -- backslash
      parts = parts or {}
      n = n + 1
      parts[n] = sub(text, pos, at - 1)
      local e = sub(text, at + 1, at + 1)
      if e == "u" then
        local hex = sub(text, at + 2, at + 5)
        if not find(hex, "^%x%x%x%x$") then fail(text, at, "bad \\u escape") end
        local code = tonumber(hex, 16)
        pos = at + 6
        if code >= 0xD800 and code <= 0xDBFF then
          local low = find(text, "^\\u[dD][c-fC-F]%x%x", pos) and tonumber(sub(text, pos + 2, pos + 5), 16)
          if low then
            code = 0x10000 + (code - 0xD800) * 0x400 + (low - 0xDC00)
            pos = pos + 6
          end
        end
        n = n + 1
        parts[n] = utf8_char(code)
      else
        local u = unescape[e]
        if not u then fail(text, at, "bad escape \\" .. e) end
        n = n + 1
        parts[n] = u
        pos = at + 2
      end
    else
      fail(text, at, "control character in string")
    end
  end
end

local literals = { t = { "true", true }, f = { "false", false }, n = { "null", null } }

decode_value = function(text, pos, depth)
  pos = skip(text, pos)
  local c = sub(text, pos, pos)
  if c == "{" then
    if depth >= MAX_DEPTH then fail(text, pos, "nested more than " .. MAX_DEPTH .. " levels deep") end
    local obj = setmetatable({}, object_mt)
    pos = skip(text, pos + 1)
    if sub(text, pos, pos) == "}" then return obj, pos + 1 end
    while true do
      if sub(text, pos, pos) ~= '"' then fail(text, pos, "object key (a string) expected") end
      local key
      key, pos = decode_string(text, pos + 1)
      pos = skip(text, pos)
      if sub(text, pos, pos) ~= ":" then fail(text, pos, "':' expected") end
      local v
      v, pos = decode_value(text, pos + 1, depth + 1)
      obj[key] = v
      pos = skip(text, pos)
      local d = sub(text, pos, pos)
      if d == "}" then return obj, pos + 1 end
      if d ~= "," then fail(text, pos, "',' or '}' expected") end
      pos = skip(text, pos + 1)
    end
  elseif c == "[" then
    if depth >= MAX_DEPTH then fail(text, pos, "nested more than " .. MAX_DEPTH .. " levels deep") end
    local arr, n = setmetatable({}, array_mt), 0
    pos = skip(text, pos + 1)
    if sub(text, pos, pos) == "]" then return arr, pos + 1 end
    while true do
      local v
      v, pos = decode_value(text, pos, depth + 1)
      n = n + 1
      arr[n] = v
      pos = skip(text, pos)
      local d = sub(text, pos, pos)
      if d == "]" then return arr, pos + 1 end
      if d ~= "," then fail(text, pos, "',' or ']' expected") end
      pos = pos + 1
    end
  elseif c == '"' then
    return decode_string(text, pos + 1)
  elseif c == "" then
    fail(text, pos, "unexpected end of text")
  else
    local lit = literals[c]
    if lit then
      if sub(text, pos, pos + #lit[1] - 1) ~= lit[1] then fail(text, pos, "unexpected character '" .. c .. "'") end
      return lit[2], pos + #lit[1]
    end
    local s, e = find(text, "^-?%d+", pos)
    if not s then fail(text, pos, "unexpected character '" .. c .. "'") end
    local digits = sub(text, s, e)
    if #digits > 1 and find(digits, "^-?0%d") then fail(text, pos, "number with a leading zero") end
    local _, fe = find(text, "^%.%d+", e + 1)
    local _, ee = find(text, "^[eE][-+]?%d+", (fe or e) + 1)
    local last = ee or fe or e
    local value = tonumber(sub(text, s, last))
    if not value then fail(text, pos, "bad number") end
    return value, last + 1
  end
end

-- decode(text) -> value | nil, err. A second argument (a codec is called with
-- the message kind) is ignored.
function json.decode(text)
  if type(text) ~= "string" then
    error(("bad argument #1 to 'mw.json.decode' (string expected, got %s)"):format(type(text)), 2)
  end
  local ok, value, pos = pcall(decode_value, text, 1, 0)
  if not ok then return nil, value end
  pos = skip(text, pos)
  if pos <= #text then
    local ok2, err = pcall(fail, text, pos, "text after the JSON value")
    return nil, err
  end
  return value
end

return json
