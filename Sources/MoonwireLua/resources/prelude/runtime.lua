-- The parts of the `mw` module written in Lua, one file per concern, run in
-- this order once per Lua state: runtime, connections, servers, glue, metrics,
-- load_models, module. Each gets the Swift bindings (`host`) and `prelude`, the
-- table through which the parts share their internals; module.lua, the last,
-- returns the module, the function that starts a script's main chunk, and the
-- internals the test runner builds on.
--
-- Design rules:
--  * Calls that look blocking (mw.sleep, and the connection's receive,
--    wait_open, request) yield here, in Lua, with coroutine.yield. Nothing
--    yields from C or Swift.
--  * Every coroutine moonwire starts is resumed through `resume`, which reports
--    an uncaught error with that coroutine's own traceback.
--  * Misuse raises at the caller's line (error level 2); failures from outside
--    the script return nil, err. Every part is a chunk named "@moonwire/...",
--    which user_level and the C message handler pass over.
--
-- This part: error texts and levels, the coroutine runtime (resume, mw.spawn,
-- mw.sleep), the timers, and the Lua-side state of connections and servers.

local host, prelude = ...
local EXIT = host.exit_sentinel

local mw = {}

-- mw.inspect, once glue.lua has loaded it (prelude.set_inspect).
local inspect_value

-- The text of an error value. One that is not a string (error({ code = 42 }),
-- error()) is printed, a table through mw.inspect, after the line of the
-- user's code that raised it: on the running stack (`where` nil), in the dead
-- coroutine `where`, or nowhere (`where` false).
local function describe(err, where)
  if type(err) == "string" then return err end
  local meta = getmetatable(err)
  if meta and meta.__tostring then return tostring(err) end
  local text = err == nil and "Nil error" or (type(err) == "table" and inspect_value) and inspect_value(err) or tostring(err)
  if where == false then return text end
  for level = where and 0 or 2, 60 do
    local info
    if where then info = debug.getinfo(where, level, "Sl") else info = debug.getinfo(level, "Sl") end
    if not info then break end
    if info.what ~= "C" and info.source:sub(1, 10) ~= "@moonwire/" and info.currentline > 0 then
      return info.short_src .. ":" .. info.currentline .. ": " .. text
    end
  end
  return text
end

-- Coroutines a test runner gave up on (timed out): never resumed again.
local abandoned = setmetatable({}, { __mode = "k" })
-- What each waiting coroutine waits in ("c:receive"), for a timeout's message.
local waiting_in = setmetatable({}, { __mode = "k" })
-- The mw.vus session each of its coroutines (and those they spawned) belongs to:
-- the connections they open are the session's, closed when it ends.
local session_of = setmetatable({}, { __mode = "k" })

local function resumed(co, ...)
  waiting_in[co] = nil
  return ...
end

local function resume(co, ...)
  if abandoned[co] then return end
  local ok, err = coroutine.resume(co, ...)
  if not ok then
    -- mw.exit unwinds every coroutine on its way out; pass it on.
    if err == EXIT then error(EXIT, 0) end
    host.uncaught(debug.traceback(co, describe(err, co)))
  end
end

-- The level, as error() counts it from its caller, of the first function from
-- `level` up that is the user's: frames of moonwire's own Lua (chunks named
-- "@moonwire/...") and C functions are passed over, so that misuse is blamed
-- on the user's line even when it is found a few calls deep in here.
local function user_level(level)
  while true do
    local info = debug.getinfo(level + 1, "S")
    if not info then return level end
    if info.what ~= "C" and info.source:sub(1, 10) ~= "@moonwire/" then return level end
    level = level + 1
  end
end

local function bad_argument(n, fname, expected, value)
  error(("bad argument #%d to '%s' (%s expected, got %s)"):format(n, fname, expected, type(value)), user_level(3))
end

local function running_coroutine(fname)
  local co, main = coroutine.running()
  if main then
    error(fname .. ": only inside a coroutine (the main chunk, mw.spawn or a test body);"
      .. " a callback cannot wait, start a coroutine with mw.spawn", user_level(2))
  end
  return co
end

function mw.spawn(fn, ...)
  if type(fn) ~= "function" then bad_argument(1, "mw.spawn", "function", fn) end
  local co = coroutine.create(fn)
  session_of[co] = session_of[coroutine.running()]
  resume(co, ...)
  return co
end

function mw.sleep(seconds)
  if type(seconds) ~= "number" then bad_argument(1, "mw.sleep", "number", seconds) end
  local co = running_coroutine("mw.sleep")
  host.after(seconds, function() resume(co) end)
  waiting_in[co] = "mw.sleep"
  resumed(co, coroutine.yield())
end

mw.after = host.after
mw.every = host.every
mw.now = host.now
-- virtual time: true when the clock is virtual (moonwire test --virtual-time)
mw.virtual_time = host.virtual_time
mw.exit = host.exit
mw.limits = host.limits
mw.hex = host.hex
mw.unhex = host.unhex
mw.base64 = host.base64
mw.unbase64 = host.unbase64

-- Handler lists, waiters and inboxes start as this one shared empty table and
-- get their own on the first append: most connections never use most of them,
-- and seven empty tables would cost half a kilobyte per connection. Never
-- write into NONE; go through append.
local NONE = {}
local function append(st, key, value)
  local list = st[key]
  if list == NONE then
    list = {}
    st[key] = list
  end
  list[#list + 1] = value
end

-- The Lua-side state of a connection or server, for its methods: a lookup in
-- `registry` that names `expected` when self is something else.
local function state_lookup(registry, expected)
  return function(obj, fname)
    local st = registry[obj]
    if not st then
      error(("bad self to '%s' (%s expected, got %s)"):format(fname, expected, type(obj)), user_level(3))
    end
    return st
  end
end

-- Adds on_<event>(fn) methods that append fn to the object's handler list.
local function define_handlers(target, prefix, events, lookup)
  for _, event in ipairs(events) do
    local key, fname = "on_" .. event, prefix .. ":on_" .. event
    target[key] = function(self, fn)
      local st = lookup(self, fname)
      if type(fn) ~= "function" then bad_argument(1, fname, "function", fn) end
      append(st, key, fn)
      return self
    end
  end
end

-- Runs a script's main chunk as a coroutine, so that it can wait (mw.sleep,
-- c:receive) from its top level.
local function start(main, script, ...)
  mw.args = { ... }
  -- arg[-1]: the interpreter, as lua puts it there ("/usr/bin/moonwire lua").
  arg = { [-1] = host.interpreter, [0] = script, ... }
  resume(coroutine.create(main), ...)
end

function prelude.set_inspect(fn) inspect_value = fn end

prelude.mw, prelude.EXIT, prelude.start = mw, EXIT, start
prelude.describe, prelude.resume, prelude.resumed, prelude.user_level = describe, resume, resumed, user_level
prelude.bad_argument, prelude.running_coroutine = bad_argument, running_coroutine
prelude.abandoned, prelude.waiting_in, prelude.session_of = abandoned, waiting_in, session_of
prelude.NONE, prelude.append, prelude.state_lookup, prelude.define_handlers = NONE, append, state_lookup, define_handlers
