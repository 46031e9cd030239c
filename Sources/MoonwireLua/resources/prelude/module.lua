-- Last: the module as scripts get it (require "moonwire", the global mw), and
-- what the host and the test runner get back.

local host, prelude = ...
local mw, start, resume, NONE = prelude.mw, prelude.start, prelude.resume, prelude.NONE
local abandoned, waiting_in = prelude.abandoned, prelude.waiting_in
local events, conns, server_events, servers = prelude.events, prelude.conns, prelude.server_events, prelude.servers

package.loaded.moonwire = mw
-- The modules shipped in the binary (require "moonwire.mqtt"): searched right after
-- package.preload, before package.path. Each gets, after require's two arguments,
-- the prelude's own helpers (`kit`), so that it needs no copy of them: misuse at
-- the user's line, the check that the caller may wait (before the call's side
-- effects), and resume for the coroutines it keeps (they report errors as
-- mw.spawn's do). Its waits are mw.future's.
local kit = {
  misuse = prelude.misuse,
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
    end
    st = servers[obj]
    if st then st.on_connect, st.on_message, st.on_close = {}, {}, {} end
  end,
}

return mw, start, internal
