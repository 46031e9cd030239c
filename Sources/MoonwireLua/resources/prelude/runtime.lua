-- The parts of the `mw` module written in Lua, one file per concern, run in
-- this order once per Lua state: runtime, connections, servers, glue, metrics,
-- load_models, module. Each gets the Swift bindings (`host`) and `prelude`, the
-- table through which the parts share their internals; module.lua, the last,
-- returns the module, the function that starts a script's main chunk, and the
-- internals the test runner builds on.
--
-- Design rules:
--  * Calls that look blocking (mw.sleep, f:wait, and the connection's receive,
--    wait_open, request) yield here, in Lua, with coroutine.yield. Nothing
--    yields from C or Swift; the shipped modules wait with mw.future.
--  * Every coroutine moonwire starts is resumed through `resume`, which reports
--    an uncaught error with that coroutine's own traceback.
--  * Misuse raises at the caller's line (error level 2); failures from outside
--    the script return nil, err. Every part is a chunk named "@moonwire/...",
--    which user_level and the C message handler pass over.
--
-- This part: error texts and levels, the coroutine runtime (resume, mw.spawn,
-- mw.sleep, mw.future), the timers, and the Lua-side state of connections and servers.

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

-- mw.connect's and mw.listen's arguments: a URL, then an options table or nothing.
local function check_endpoint(fname, url, opts)
  if type(url) ~= "string" then bad_argument(1, fname, "string", url) end
  if opts ~= nil and type(opts) ~= "table" then bad_argument(2, fname, "table", opts) end
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

-- Futures (mw.future): a value set once, by anyone, that any number of
-- coroutines wait for. The one wait primitive besides the connection's own
-- waiters: the shipped modules' blocking calls (cp:call, m:subscribe, ...) are
-- built on it, so that every wait goes through `resume` (an error in the woken
-- code is reported once, with its own traceback; an abandoned test stays
-- abandoned) and names itself in waiting_in ("timed out ... waiting in cp:call").
-- A queue, oldest first, with head and tail indexes (table.remove(t, 1) would
-- move every item each time): a connection's inbox, and a module's (kit.inbox).
-- With a limit, a push into a full one drops the oldest, counts it (q.dropped) and
-- returns true, for the owner to say so; without one it never drops.
local Queue = {}
Queue.__index = Queue

local function queue(limit)
  return setmetatable({ head = 1, tail = 0, limit = limit, dropped = 0 }, Queue)
end

function Queue:count() return self.tail - self.head + 1 end

function Queue:push(item)
  local dropped = false
  if self.limit and self.tail - self.head + 1 >= self.limit then
    self[self.head] = nil
    self.head = self.head + 1
    self.dropped = self.dropped + 1
    dropped = true
  end
  self.tail = self.tail + 1
  self[self.tail] = item
  return dropped
end

-- The oldest item, taken out, or nil.
function Queue:pop()
  local head = self.head
  if head > self.tail then return nil end
  local item = self[head]
  self[head] = nil
  self.head = head + 1
  return item
end

-- The oldest item that `match` accepts, taken out, or nil.
function Queue:take(match)
  for i = self.head, self.tail do
    local item = self[i]
    if match(item) then
      table.move(self, i + 1, self.tail, i)
      self[self.tail] = nil
      self.tail = self.tail - 1
      return item
    end
  end
end

local Future = {}
Future.__index = Future
Future.__name = "moonwire.future"

function Future.__tostring(f)
  return ("future (%s, %s)"):format(f.name, f.values and "set" or "not set")
end

local function check_future(f, fname)
  if getmetatable(f) ~= Future then
    error(("bad self to '%s' (a future from mw.future expected, got %s)"):format(fname, type(f)), user_level(3))
  end
end

-- mw.future([name]) -> f. `name` is what a wait on it is called in errors and
-- in a test's timeout ("waiting in <name>"); "f:wait" when none is given.
function mw.future(name)
  if name ~= nil and type(name) ~= "string" then bad_argument(1, "mw.future", "string", name) end
  return setmetatable({ name = name or "f:wait", values = false, waiters = NONE }, Future)
end

-- f:set(...) -> true, or false when it was set already (the first values stay).
-- Wakes every coroutine waiting in f:wait, in the order they began to wait.
function Future:set(...)
  check_future(self, "f:set")
  if self.values then return false end
  local values = table.pack(...)
  self.values = values
  local waiters = self.waiters
  self.waiters = NONE
  for i = 1, #waiters do
    local w = waiters[i]
    w.done = true
    if w.timer then w.timer:cancel() end
    resume(w.co, table.unpack(values, 1, values.n))
  end
  return true
end

function Future:is_set()
  check_future(self, "f:is_set")
  return self.values ~= false
end

-- f:wait([timeout]) -> the values given to f:set (at once when it was set
-- already), or nil, "timeout" after `timeout` seconds (f stays unset: f:is_set()
-- tells a timeout from a set(nil, "timeout")). Only inside a coroutine.
function Future:wait(timeout)
  check_future(self, "f:wait")
  local name = self.name
  if timeout ~= nil and (type(timeout) ~= "number" or timeout < 0) then
    error(("bad argument to '%s' (timeout: seconds expected, got %s)"):format(name, type(timeout)), user_level(2))
  end
  local co = running_coroutine(name)
  local values = self.values
  if values then return table.unpack(values, 1, values.n) end
  local w = { co = co }
  append(self, "waiters", w)
  if timeout then
    w.timer = host.after(timeout, function()
      if w.done then return end
      w.done = true
      local list = self.waiters
      for i = 1, #list do
        if list[i] == w then table.remove(list, i) break end
      end
      resume(co, nil, "timeout")
    end)
  end
  waiting_in[co] = name
  return resumed(co, coroutine.yield())
end

-- Waiters in a list, for the shipped modules' events that pick whom they wake
-- (ocpp's cp:expect(action)): `entry.future` waits in `list` until wake_listed
-- picks it; a wait that times out leaves the list and returns nil, timeout_text
-- (default "timeout").
local function unlisted(list, entry, timeout_text, ...)
  if entry.future.values then return ... end
  for i = 1, #list do
    if list[i] == entry then table.remove(list, i) break end
  end
  return nil, timeout_text or "timeout"
end

local function wait_listed(list, entry, timeout, timeout_text)
  local f = entry.future
  running_coroutine(f.name)
  list[#list + 1] = entry
  return unlisted(list, entry, timeout_text, f:wait(timeout))
end

-- Sets (with ...) the future of every entry of `list` that `pick` accepts (every
-- entry without `pick`), after taking them out of it; true when there was one.
local function wake_listed(list, pick, ...)
  local chosen, keep = {}, 1
  for i = 1, #list do
    local e = list[i]
    list[i] = nil
    if not pick or pick(e) then chosen[#chosen + 1] = e else list[keep], keep = e, keep + 1 end
  end
  for i = 1, #chosen do chosen[i].future:set(...) end
  return chosen[1] ~= nil
end

-- Misuse found in moonwire's own Lua (the shipped modules): raised at the
-- user's line, with string.format when given arguments.
local function misuse(message, ...)
  if select("#", ...) > 0 then message = message:format(...) end
  error(message, user_level(2))
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

-- Adds on_<event>(fn) methods that append fn to the object's handler list: the
-- list lookup(self, fname)[key], where key is key_format ("on_%s" when not given)
-- with the event's name; then changed(state, key), when given.
local function define_handlers(target, prefix, events, lookup, key_format, changed)
  for _, event in ipairs(events) do
    local key, fname = (key_format or "on_%s"):format(event), prefix .. ":on_" .. event
    target["on_" .. event] = function(self, fn)
      local st = lookup(self, fname)
      if type(fn) ~= "function" then bad_argument(1, fname, "function", fn) end
      append(st, key, fn)
      if changed then changed(st, key) end
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
prelude.bad_argument, prelude.running_coroutine, prelude.misuse = bad_argument, running_coroutine, misuse
prelude.check_endpoint = check_endpoint
prelude.wait_listed, prelude.wake_listed = wait_listed, wake_listed
prelude.abandoned, prelude.waiting_in, prelude.session_of = abandoned, waiting_in, session_of
prelude.NONE, prelude.append, prelude.state_lookup, prelude.define_handlers = NONE, append, state_lookup, define_handlers
prelude.queue = queue
