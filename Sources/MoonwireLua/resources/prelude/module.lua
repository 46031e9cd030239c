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
-- package.preload, before package.path.
local bundled_module = host.bundled_module
table.insert(package.searchers, 2, function(name)
  local source, chunk = bundled_module(name)
  if not source then return "no module '" .. name .. "' shipped in moonwire" end
  local f, err = load(source, chunk, "t")
  if not f then error(err, 0) end
  return f, chunk:sub(2)
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
