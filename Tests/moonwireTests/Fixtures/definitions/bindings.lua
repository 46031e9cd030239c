-- Prints every name the running program binds, in the form `moonwire defs --names`
-- prints the declared ones: what mw holds (namespaces walked), the methods of every
-- kind of object it returns, and the globals a script starts with (G:name).
local out = {}
local function emit(name) out[#out + 1] = name end
-- A function written in Lua also says how many parameters it takes ("A:mw.spawn 1+"),
-- for the test to hold against the declarations.
local function emit_params(name, f)
  local info = debug.getinfo(f, "Su")
  if info.what == "Lua" then emit(("A:%s %d%s"):format(name, info.nparams, info.isvararg and "+" or "")) end
end

local function has_function(t)
  for _, v in pairs(t) do if type(v) == "function" then return true end end
  return false
end

local function walk(t, prefix)
  for k, v in pairs(t) do
    if type(k) == "string" and not k:match("^_%l") then
      local name = prefix .. "." .. k
      emit(name)
      if type(v) == "function" then emit_params(name, v) end
      if type(v) == "table" and has_function(v) and getmetatable(v) == nil or k == "log" then walk(v, name) end
    end
  end
end
walk(mw, "mw")

local function methods(class, index)
  if type(index) == "function" then
    -- The peer's __index is a function (it also serves id and remote_address): its methods table is an upvalue.
    for i = 1, math.huge do
      local name, value = debug.getupvalue(index, i)
      if not name then break end
      if type(value) == "table" and value.send then index = value break end
    end
  end
  for k, v in pairs(index) do
    if type(v) == "function" and not k:match("^_") and not k:match("^__") then
      emit(class .. ":" .. k)
      emit_params(class .. ":" .. k, v)
    end
  end
end

local s = assert(mw.listen("ws://127.0.0.1:0/"))
local c = mw.connect(s:url())
local h = mw.metrics.histogram("dump_seconds")
methods("mw.Connection", getmetatable(c).__index)
methods("mw.Server", getmetatable(s).__index)
methods("mw.Timer", getmetatable(mw.after(0, function() end)).__index)
methods("mw.Counter", getmetatable(mw.metrics.counter("dump_total")).__index)
methods("mw.Gauge", getmetatable(mw.metrics.gauge("dump_level")).__index)
methods("mw.Histogram", getmetatable(h).__index)
methods("mw.Timing", getmetatable(h:start()).__index)
methods("mw.Future", getmetatable(mw.future()).__index)
s:on_connect(function(peer)
  methods("mw.Peer", getmetatable(peer).__index)
  for k in pairs(_G) do emit("G:" .. k) end
  table.sort(out)
  print(table.concat(out, "\n"))
  c:close()
  s:close()
end)
