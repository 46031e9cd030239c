-- What a connection has in either role, a client's (mw.connect) or a server's
-- peer: the Lua half of the methods `c:` and `peer:` share, declared once here
-- and given to both. Their Swift half is declared once too
-- (ScriptRuntime.sessionMethods: send, ping, close, stats); a method added to
-- `session_methods` below is a method of both.

local host, prelude = ...
local user_level, NONE, append = prelude.user_level, prelude.NONE, prelude.append
local conns, peer_states = prelude.conns, prelude.peer_states
local wait, wake, is_kind, encode_message = prelude.wait, prelude.wake, prelude.is_kind, prelude.encode_message

-- The state of `self` (a connection's or a peer's), else misuse at the caller's line.
local function session_state(self, fname, expected)
  local st = conns[self] or peer_states[self]
  if not st then
    error(("bad self to '%s' (%s expected, got %s)"):format(fname, expected, type(self)), user_level(3))
  end
  return st
end

-- Each method as fn(raw, prefix, expected) -> method: `raw` is the class's own
-- Swift half (its errors name `c:send` or `peer:send`), `prefix` "c" or "peer".
local session_methods = {}

function session_methods.send(raw)
  local raw_send = raw.send
  return function(self, data, kind)
    -- The hot path: no call to session_state or encode_message for a message that
    -- needs neither (two Lua calls, about 4 % of a pipelined message's instructions).
    local st = conns[self] or peer_states[self] or session_state(self, raw.prefix .. ":send", raw.expected)
    local codec = st.codec
    if codec and not codec.native then data = encode_message(st, data, raw.prefix .. ":send") end
    return raw_send(self, data, kind or st.kind)
  end
end

function session_methods.on_drain(raw)
  local fname = raw.prefix .. ":on_drain"
  return function(self, fn)
    local st = session_state(self, fname, raw.expected)
    if type(fn) ~= "function" then prelude.bad_argument(1, fname, "function", fn) end
    append(st, "on_drain", fn)
    return self
  end
end

-- Waits until the connection can take more: at once when its send budget was not
-- reached, else until buffered fell under half of it (on_drain); nil, "closed" once
-- it ended for good.
function session_methods.drain(raw)
  local over_budget, fname = raw._over_budget, raw.prefix .. ":drain"
  return function(self, timeout)
    local st = session_state(self, fname, raw.expected)
    if not over_budget(self) then return true end
    if st.final then return nil, "closed" end
    return wait(st, fname, "drain", timeout)
  end
end

-- Gives the shared methods to the methods table of one class.
local function share(methods, prefix, expected)
  local raw = { prefix = prefix, expected = expected, send = methods.send, _over_budget = methods._over_budget }
  -- Only the prelude's: reroute (connections.lua) took _route already.
  methods._over_budget, methods._route = nil, nil
  for name, make in pairs(session_methods) do methods[name] = make(raw) end
end
share(host.connection_methods, "c", "a connection from mw.connect")
share(host.peer_methods, "peer", "a peer")

-- A peer's state, made when it connects to server state `server` (nil for a server
-- without its Lua side): its codec and handlers are the server's.
function prelude.new_peer_state(peer, server)
  local codec = server and server.codec
  local st = { owner = server or { on_message = NONE, auto_rules = false }, codec = codec or false,
               kind = codec and codec.kind, on_drain = NONE, on_error = NONE, waiters = NONE, inbox = false,
               final = false, peer = true, decoded_raw = false, session = peer, route = false }
  peer_states[peer] = st
  if server then server.peers[st] = true end
  prelude.reroute(st)
end

-- A session ended for good: drain() waiters hear "closed".
function prelude.session_ended(st)
  st.final = true
  wake(st, is_kind("drain"), nil, "closed")
end
