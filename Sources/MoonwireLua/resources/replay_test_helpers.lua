-- Each ignored path as a Lua pattern over where a value sits, written
-- ".a[0].id": a bare name or *... at any depth, else from the top; a path
-- without [positions] passes over arrays (compared without them).
local rules = {}
for _, path in ipairs(ignore) do
  local any = path:sub(1, 1) == "*" or not path:find("[.%[]")
  local rest = path:gsub("^[*$]", "")
  if not rest:find("^[.%[]") then rest = "." .. rest end
  local pattern = rest:gsub("%p", "%%%0"):gsub("%%%[%%%*%%%]", "%%[%%d+%%]")
  rules[#rules + 1] = { pattern = (any and "" or "^") .. pattern .. "$", positional = any or rest:find("[", 1, true) }
end

-- Leaves out the ignored parts: `full` is where `value` sits with array
-- positions (from 0), `keys` without them.
local function strip(value, full, keys)
  if type(value) ~= "table" then return value end
  full, keys = full or "", keys or ""
  local out = {}
  for k, v in pairs(value) do
    local f, p = full .. "." .. tostring(k), keys .. "." .. tostring(k)
    if math.type(k) == "integer" then f, p = full .. "[" .. (k - 1) .. "]", keys end
    local skip = false
    for _, rule in ipairs(rules) do
      if (rule.positional and f or p):find(rule.pattern) then skip = true end
    end
    if not skip then out[k] = strip(v, f, p) end
  end
  return out
end

-- A JSON message as a value without the ignored fields; anything else as it is.
local function value_of(message)
  local ok, decoded = pcall(mw.json.decode, message)
  if ok and type(decoded) == "table" then return strip(decoded) end
  return message
end

-- With loose matching, the recorded fields must be there; more may come.
local function subset(expected, actual)
  if type(expected) ~= "table" or type(actual) ~= "table" then return expected == actual end
  for k, v in pairs(expected) do
    if not subset(v, actual[k]) then return false end
  end
  return true
end

-- The next message must be the recorded one.
local function expect(c, expected, what)
  local message, err = c:receive(timeout)
  assert(message, ("%s: nothing came (%s)"):format(what, err))
  if loose and subset(value_of(expected), value_of(message)) then return end
  assert.are.same(value_of(expected), value_of(message), what .. ": the reply differs from the recording")
end
