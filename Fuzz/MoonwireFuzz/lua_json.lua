-- The lua-json fuzz target (scripts/fuzz.sh lua-json): mw.json against values built
-- from the input and against the input itself.
--
-- Called once with the mw.json table; returns check(input), which raises when mw.json
-- breaks a promise (the harness turns that into a crash):
--  * a value built from the input (nested arrays and objects, integers including
--    math.mininteger and math.maxinteger, floats including -0.0, strings with every
--    byte, mw.json.null, empty mw.json.array / mw.json.object) encodes, compact or
--    pretty, and decodes to an equal value: same integer or float, same float bits,
--    same bytes, same array or object;
--  * a value holding NaN or an infinity does not encode: a clean error saying so;
--  * decode(input) returns a value or nil and "... at line L column C (byte B)", never
--    raises; a value it returns encodes (unless it holds an infinity, from a literal
--    such as 1e999) and decodes to an equal value;
--  * with a second codec (json.lua's, the reference of the native mw.json), every encode
--    and decode above is made with both: the same text or error (its words), the same
--    value or error.
local json, reference = ...
local byte, sub, find, pack, unpack = string.byte, string.sub, string.find, string.pack, string.unpack
local math_type, huge = math.type, math.huge

local MAX_DEPTH, MAX_NODES = 40, 2000

-- The JSON kind a table encodes as (json.lua's rule; decoded tables carry theirs).
local function kind(t)
  local meta = getmetatable(t)
  if meta and meta.__jsontype then return meta.__jsontype end
  local k = next(t)
  return (k == nil or math_type(k) ~= "integer") and "object" or "array"
end

local function equal(a, b)
  local ta = type(a)
  if ta ~= type(b) then return false end
  if ta == "number" then
    if math_type(a) ~= math_type(b) then return false end
    if math_type(a) == "integer" then return a == b end
    return pack("<d", a) == pack("<d", b)
  elseif ta ~= "table" or a == json.null or b == json.null then
    return a == b
  end
  if kind(a) ~= kind(b) then return false end
  local n = 0
  for k, v in pairs(a) do
    if not equal(v, b[k]) then return false end
    n = n + 1
  end
  for _ in pairs(b) do n = n - 1 end
  return n == 0
end

-- Both codecs behind one table: each call made with both, the results compared.
if reference then
  local primary = json
  local function bare(err) return (tostring(err):gsub("^[^:\n]*:%d+: ", "")) end
  json = { null = primary.null, array = primary.array, object = primary.object }
  function json.encode(v, opts)
    local ok1, t1 = pcall(primary.encode, v, opts)
    local ok2, t2 = pcall(reference.encode, v, opts)
    if ok1 ~= ok2 or (ok1 and t1 ~= t2) or (not ok1 and bare(t1) ~= bare(t2)) then
      error("the codecs disagree on encode:\n" .. tostring(t1) .. "\n" .. tostring(t2), 0)
    end
    if not ok1 then error(t1, 0) end
    return t1
  end
  function json.decode(text)
    local a, ea = primary.decode(text)
    local b, eb = reference.decode(text)
    if ea ~= eb or not equal(a, b) then
      error("the codecs disagree on decode:\n" .. tostring(ea) .. "\n" .. tostring(eb), 0)
    end
    return a, ea
  end
end

local special_floats = {
  0.0, -0.0, 0.5, -1.5, 1e16, -1e16, 2.0 ^ 53, 2.0 ^ 53 + 2, 2.0 ^ 63, -2.0 ^ 63, 2.0 ^ 64, 1e300, 5e-324,
  2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 1 / 3, 123456789012345.6, huge, -huge, 0 / 0,
}
local special_integers = { math.mininteger, math.maxinteger, 0, -1, 1, 2 ^ 53, -(2 ^ 53) - 1, 1 << 62 }
for i, v in ipairs(special_integers) do special_integers[i] = math.tointeger(v) end

-- Builds a value from the input: each byte picks what comes next, the bytes after it
-- give its contents. Past the end every read is 0 (an integer), so it terminates.
local function build(input)
  local pos, nodes = 1, 0
  local function u8()
    local b = byte(input, pos) or 0
    pos = pos + 1
    return b
  end
  local function take(n)
    local piece = sub(input, pos, pos + n - 1)
    pos = pos + n
    return piece .. ("\0"):rep(n - #piece)
  end
  local function text()
    local n = u8()
    local s = sub(input, pos, pos + n - 1)
    pos = pos + n
    return s
  end
  local value
  value = function(depth)
    nodes = nodes + 1
    local op = u8() % 12
    if op >= 9 and (depth >= MAX_DEPTH or nodes >= MAX_NODES or pos > #input) then op = op - 9 end
    if op == 0 then
      return (unpack("<i8", take(8)))
    elseif op == 1 then
      return special_integers[u8() % #special_integers + 1]
    elseif op == 2 then
      return u8() - 128
    elseif op == 3 then
      return (unpack("<d", take(8)))
    elseif op == 4 then
      return special_floats[u8() % #special_floats + 1]
    elseif op == 5 then
      return text()
    elseif op == 6 then
      return u8() & 1 == 1
    elseif op == 7 then
      return json.null
    elseif op == 8 then
      return (u8() & 1 == 1) and json.array() or json.object()
    elseif op == 9 then
      return (u8() - 128) / (2.0 ^ (u8() % 64))
    elseif op == 10 then
      local t = {}
      for i = 1, u8() % 8 do t[i] = value(depth + 1) end
      return t
    else
      local t = {}
      for _ = 1, u8() % 8 do t[text()] = value(depth + 1) end
      return t
    end
  end
  local options = ({ false, { pretty = true }, { sort_keys = true }, { indent = "\t" } })[u8() % 4 + 1] or nil
  return value(0), options
end

-- Whether NaN or an infinity is left in `v` (a repeated object key replaces a value).
local function nonfinite(v)
  if type(v) == "number" then return v ~= v or v == huge or v == -huge end
  if type(v) ~= "table" then return false end
  for _, item in pairs(v) do
    if nonfinite(item) then return true end
  end
  return false
end

local function round_trip(v, options, what)
  local ok, text = pcall(json.encode, v, options)
  if not ok then error(what .. ": encode failed: " .. tostring(text), 0) end
  local back, err = json.decode(text)
  if back == nil then error(what .. ": decoding what encode wrote failed: " .. err .. "\n" .. text, 0) end
  if not equal(v, back) then error(what .. ": the round trip changed the value:\n" .. text .. "\n" .. json.encode(back), 0) end
end

return function(input)
  local v, options = build(input)
  if nonfinite(v) then
    local ok, err = pcall(json.encode, v, options)
    if ok then error("encode wrote NaN or an infinity: " .. err, 0) end
    if not find(err, "^mw%.json%.encode: value.*: %-?%a+ cannot be written as JSON$") then
      error("encode failed on NaN or an infinity with: " .. err, 0)
    end
  else
    round_trip(v, options, "built value")
  end

  local ok, decoded, err = pcall(json.decode, input)
  if not ok then error("decode raised: " .. tostring(decoded), 0) end
  if decoded == nil then
    if type(err) ~= "string" or not find(err, " at line %d+ column %d+ %(byte %d+%)$") then
      error("decode failed without a clean error: " .. tostring(err), 0)
    end
    return
  end
  local encoded, message = pcall(json.encode, decoded)
  if encoded then
    round_trip(decoded, nil, "decoded value")
  elseif not find(message, "inf cannot be written as JSON$") then
    error("a decoded value does not encode: " .. message, 0)
  end
end
