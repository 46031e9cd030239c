-- Lua-heavy work inside one call from the host (the main chunk), for the cost
-- of the guard's hook: moonwire run bench/hook/lua_heavy.lua loop|calls|json [n]
local what, n = arg[1] or "loop", tonumber(arg[2])
local clock = os.clock
local started = clock()
if what == "loop" then
  local x = 0
  for i = 1, n or 30000000 do x = x + i % 7 end
  assert(x > 0)
elseif what == "calls" then
  local function f(a, b) return a + b end
  local x = 0
  for i = 1, n or 10000000 do x = f(x, i) end
  assert(x > 0)
elseif what == "json" then
  local value = { id = 9007199254740993, name = "moonwire", tags = { "a", "b", "c" }, nested = { x = 1.5, ok = true } }
  for _ = 1, n or 300000 do
    local back = mw.json.decode(mw.json.encode(value))
    assert(back.id == value.id)
  end
else
  error("loop, calls or json")
end
print(("%s %.3f s"):format(what, clock() - started))
