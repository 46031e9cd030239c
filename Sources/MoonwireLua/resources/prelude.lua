-- The parts of the `mw` module written in Lua. Loaded once per Lua state with
-- the Swift bindings (`host`) as its argument; returns the module, the
-- function that starts a script's main chunk, and the internals the test
-- runner builds on.
--
-- Design rules:
--  * Calls that look blocking (mw.sleep, and the connection's receive,
--    wait_open, request) yield here, in Lua, with coroutine.yield. Nothing
--    yields from C or Swift.
--  * Every coroutine moonwire starts is resumed through `resume`, which reports
--    an uncaught error with that coroutine's own traceback.
--  * Misuse raises at the caller's line (error level 2); failures from outside
--    the script return nil, err.

local host = ...
local EXIT = host.exit_sentinel

local mw = {}

local function describe(err)
  if type(err) == "string" then return err end
  local meta = getmetatable(err)
  if meta and meta.__tostring then return tostring(err) end
  return "(error object is a " .. type(err) .. " value)"
end

-- Coroutines a test runner gave up on (timed out): never resumed again.
local abandoned = setmetatable({}, { __mode = "k" })

local function resume(co, ...)
  if abandoned[co] then return end
  local ok, err = coroutine.resume(co, ...)
  if not ok then
    -- mw.exit unwinds every coroutine on its way out; pass it on.
    if err == EXIT then error(EXIT, 0) end
    host.uncaught(debug.traceback(co, describe(err)))
  end
end

local function bad_argument(n, fname, expected, value)
  error(("bad argument #%d to '%s' (%s expected, got %s)"):format(n, fname, expected, type(value)), 3)
end

local function running_coroutine(fname)
  local co, main = coroutine.running()
  if main then
    error(fname .. ": only inside a coroutine (the main chunk, mw.spawn or a test body);"
      .. " a callback cannot wait, start a coroutine with mw.spawn", 3)
  end
  return co
end

function mw.spawn(fn, ...)
  if type(fn) ~= "function" then bad_argument(1, "mw.spawn", "function", fn) end
  local co = coroutine.create(fn)
  resume(co, ...)
  return co
end

function mw.sleep(seconds)
  if type(seconds) ~= "number" then bad_argument(1, "mw.sleep", "number", seconds) end
  local co = running_coroutine("mw.sleep")
  host.after(seconds, function() resume(co) end)
  coroutine.yield()
end

mw.after = host.after
mw.every = host.every
mw.now = host.now
mw.exit = host.exit
mw.hex = host.hex
mw.unhex = host.unhex
mw.base64 = host.base64
mw.unbase64 = host.unbase64

local function logger(level)
  local name = "mw.log." .. level
  return function(fmt, ...)
    local ok, message = pcall(string.format, fmt, ...)
    if not ok then error(name .. ": " .. message, 2) end
    host.log(level, message)
  end
end

mw.log = {
  debug = logger("debug"),
  info = logger("info"),
  warn = logger("warn"),
  error = logger("error"),
}

-- A private cjson instance, so a script's own settings on require "cjson"
-- do not change how mw.json behaves.
local cjson = require("cjson").new()

mw.json = {
  null = cjson.null,
  encode = function(value)
    local ok, text = pcall(cjson.encode, value)
    if not ok then error("mw.json.encode: " .. text, 2) end
    return text
  end,
  -- Malformed JSON usually comes from the peer, so it is nil, err, not an error.
  decode = function(text)
    if type(text) ~= "string" then bad_argument(1, "mw.json.decode", "string", text) end
    local ok, value = pcall(cjson.decode, text)
    if ok then return value end
    return nil, value
  end,
}

package.loaded.moonwire = mw
mw._VERSION = host.version
_G.mw = mw

-- Runs a script's main chunk as a coroutine, so that it can wait (mw.sleep,
-- c:receive) from its top level.
local function start(main, script, ...)
  mw.args = { ... }
  arg = { [-1] = "moonwire", [0] = script, ... }
  resume(coroutine.create(main), ...)
end

-- For the test runner: what it needs of the machinery above.
local internal = {
  resume = resume,
  after = host.after,
  abandon = function(co) abandoned[co] = true end,
}

return mw, start, internal
