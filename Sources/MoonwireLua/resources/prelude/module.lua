-- Last: the module as scripts get it (require "moonwire", the global mw), and
-- what the host and the test runner get back.

local host, prelude = ...
local mw, start, resume, NONE = prelude.mw, prelude.start, prelude.resume, prelude.NONE
local abandoned, waiting_in = prelude.abandoned, prelude.waiting_in
local events, conns, server_events, servers = prelude.events, prelude.conns, prelude.server_events, prelude.servers

package.loaded.moonwire = mw
-- `moonwire run`: the script's folder and --lua-path come first (host.lua_path).
package.path = host.lua_path .. package.path
package.cpath = host.lua_cpath .. package.cpath
-- The modules shipped in the binary (require "moonwire.mqtt"): searched right after
-- package.preload, before package.path. Each gets, after require's two arguments,
-- the helpers they share (`kit`), so that none keeps a copy: the prelude's misuse at
-- the user's line, the check that the caller may wait (before the call's side
-- effects), resume for the coroutines it keeps (they report errors as mw.spawn's
-- do), waiters in a list, the bounded inbox (the prelude's queue, as a connection's
-- inbox is); and the option checks, handler lists and URL escaping below. Their waits are mw.future's (wait_next: the next time).
local misuse = prelude.misuse

-- A module's options table: nil is {}, a key not in `known` is misuse.
local function check_options(opts, known, fname, argn)
  if opts == nil then return {} end
  if type(opts) ~= "table" then misuse("bad argument #%d to '%s' (table expected, got %s)", argn, fname, type(opts)) end
  for k in pairs(opts) do
    if not known[k] then misuse("bad argument #%d to '%s' (unknown option 'opts.%s')", argn, fname, tostring(k)) end
  end
  return opts
end

-- opts[key], a positive number, or `default` when not given.
local function positive(opts, key, default, fname)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "number" or v <= 0 then
    misuse("bad argument #2 to '%s' (opts.%s: a positive number expected, got %s)", fname, key, tostring(v))
  end
  return v
end

-- on_<event>(fn) methods for a module's `class`: each appends fn to the object's
-- list self.on_<event>_handlers (its constructor makes it; `lookup` and
-- `key_format` name another, as the prelude's define_handlers takes them) and
-- returns self; misuse names prefix:on_<event>.
local function itself(obj) return obj end
local function define_handlers(class, prefix, names, lookup, key_format)
  prelude.define_handlers(class, prefix, names, lookup or itself, key_format or "on_%s_handlers")
end

-- Percent-encoding (RFC 3986): %XX for every byte but the unreserved ones and
-- those in `keep` (":" in a path segment); url_unescape the other way.
local function url_escape(s, keep)
  local class = "[^%w%-%._~" .. (keep and keep:gsub("%p", "%%%0") or "") .. "]"
  return (tostring(s):gsub(class, function(c) return ("%%%02X"):format(c:byte()) end))
end

local function url_unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- The next time something happens to `obj` (a namespace joined, connection_ack):
-- every caller of wait_next waits on one future, kept in obj[key] until
-- fire_next wakes them all with its values; each caller's timeout is its own
-- (nil, "timeout"). `name` names the wait in errors ("waiting in s:wait_connected").
local function wait_next(obj, key, name, timeout)
  local f = obj[key]
  if not f then
    f = mw.future(name)
    obj[key] = f
  end
  return f:wait(timeout)
end

local function fire_next(obj, key, ...)
  local f = obj[key]
  obj[key] = nil
  if f then f:set(...) end
end

local kit = {
  wait_next = wait_next,
  fire_next = fire_next,
  url_escape = url_escape,
  url_unescape = url_unescape,
  inbox = prelude.queue,
  check_options = check_options,
  positive = positive,
  define_handlers = define_handlers,
  misuse = misuse,
  bad_argument = prelude.bad_argument,
  user_level = prelude.user_level,
  running = prelude.running_coroutine,
  resume = resume,
  wait_listed = prelude.wait_listed,
  wake_listed = prelude.wake_listed,
}
local bundled_module = host.bundled_module
table.insert(package.searchers, 2, function(name)
  local source, chunk = bundled_module(name)
  if not source then return "no module '" .. name .. "' shipped in moonwire" end
  local f, err = load(source, chunk, "t")
  if not f then error(err, 0) end
  return function(modname, path) return f(modname, path, kit) end, chunk:sub(2)
end)
mw._VERSION = host.version
mw.worker = host.worker
mw.workers = host.workers
_G.mw = mw

-- For the test runner and the host: what they need of the machinery above.
local internal = {
  events = events,
  server_events = server_events,
  resume = resume,
  after = host.after,
  abandon = function(co) abandoned[co] = true end,
  -- What mw.exit raises, for code that catches errors and must let it pass.
  exit_sentinel = host.exit_sentinel,
  waiting_in = function(co) return waiting_in[co] end,
  adopt_server = prelude.adopt_server,
  -- A test is over: what it opened hears nothing more (handlers, waiters).
  detach = function(obj)
    local st = conns[obj]
    if st then
      st.on_open, st.on_message, st.on_close, st.on_error, st.on_reconnect, st.waiters = NONE, NONE, NONE, NONE, NONE, NONE
      prelude.reroute(st)
    end
    st = servers[obj]
    if st then
      st.on_connect, st.on_message, st.on_close = {}, {}, {}
      prelude.reroute_owner(st)
    end
  end,
}

return mw, start, internal
