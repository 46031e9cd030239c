-- Servers (mw.listen) and their peers: the Lua side of each server, and the
-- dispatchers (`server_events`) Swift calls with its peers' events.

local host, prelude = ...
local mw, bad_argument = prelude.mw, prelude.bad_argument
local NONE, append, state_lookup, define_handlers = prelude.NONE, prelude.append, prelude.state_lookup, prelude.define_handlers
local without_codec, split_auto_reply, auto_answer = prelude.without_codec, prelude.split_auto_reply, prelude.auto_answer
local wait, wake, is_kind, encode_message = prelude.wait, prelude.wake, prelude.is_kind, prelude.encode_message

local servers = setmetatable({}, { __mode = "k" })
local server_methods = host.server_methods
local peer_methods = host.peer_methods
local server_of_peer = setmetatable({}, { __mode = "k" })

-- Peers have fields (id, remote_address) besides their methods.
host.peer_metatable.__index = function(peer, key)
  local method = peer_methods[key]
  if method then return method end
  if key == "id" or key == "remote_address" then
    local id, address = peer_methods._fields(peer)
    return key == "id" and id or address
  end
end

local server_state = state_lookup(servers, "a server from mw.listen")

function mw.listen(url, opts)
  if type(url) ~= "string" then bad_argument(1, "mw.listen", "string", url) end
  if opts ~= nil and type(opts) ~= "table" then bad_argument(2, "mw.listen", "table", opts) end
  local codec, auto_rules
  if opts then
    opts, codec = without_codec(opts, "mw.listen")
    auto_rules = split_auto_reply(opts, "mw.listen", codec)
  end
  local s, err = host.listen(url, opts)
  if not s then return nil, err end
  servers[s] = { codec = codec, on_connect = {}, on_message = {}, on_close = {}, auto_rules = auto_rules }
  return s
end

define_handlers(server_methods, "s", { "connect", "message", "close" }, server_state)

-- A server the host made (moonwire listen --script) gets the Lua side mw.listen gives.
function prelude.adopt_server(s)
  servers[s] = { on_connect = {}, on_message = {}, on_close = {} }
end

local raw_broadcast = server_methods.broadcast
function server_methods.broadcast(self, data, kind)
  local st = server_state(self, "s:broadcast")
  -- A codec may name its frames' kind (mw.protobuf's are binary).
  return raw_broadcast(self, encode_message(st, data, "s:broadcast"), kind or (st and st.codec and st.codec.kind))
end

local raw_peer_send = peer_methods.send
function peer_methods.send(self, data, kind)
  -- As c:send: encode_message only for a codec that encodes in Lua.
  local st = servers[server_of_peer[self]]
  local codec = st and st.codec
  if codec and not codec.native then data = encode_message(st, data, "peer:send") end
  return raw_peer_send(self, data, kind or (codec and codec.kind))
end

-- A peer's own Lua state: its on_drain handlers and the coroutines in drain().
local peer_states = setmetatable({}, { __mode = "k" })
local function peer_state(peer)
  local st = peer_states[peer]
  if not st then
    st = { on_drain = NONE, waiters = NONE }
    peer_states[peer] = st
  end
  return st
end

function peer_methods.on_drain(self, fn)
  if type(fn) ~= "function" then bad_argument(1, "peer:on_drain", "function", fn) end
  append(peer_state(self), "on_drain", fn)
  return self
end

local peer_over_budget = peer_methods._over_budget
peer_methods._over_budget = nil

function peer_methods.drain(self, timeout)
  local over, open = peer_over_budget(self)
  if not open then return nil, "closed" end
  if not over then return true end
  return wait(peer_state(self), "peer:drain", "drain", timeout)
end

local server_events = {}

function server_events.connect(s, peer, request)
  local st = servers[s]
  if not st then return end
  server_of_peer[peer] = s
  for _, handler in ipairs(st.on_connect) do handler(peer, request) end
end

-- With codec = "json" the message comes decoded, or with the decode error and the
-- raw message. A message that does not decode goes to no on_message handler: it is
-- logged, with the peer's id.
function server_events.message(s, peer, message, kind, err, raw)
  local st = servers[s]
  if not st then return end
  local codec = st.codec
  if err == nil and codec and codec.decode and not codec.native then
    raw = message
    message, err = codec.decode(message, kind)
    if message ~= nil then err = nil end
  end
  if err ~= nil then
    host.metric_add(host.errors_metric, 1)
    local shown = #raw > 200 and raw:sub(1, 200) .. "..." or raw
    host.log("warn", ("peer %s: decode: %s; the message (%d bytes): %q"):format(tostring(peer.id), tostring(err), #raw, shown))
    return
  end
  local rules = st.auto_rules
  if rules and auto_answer(rules, peer, encode_message, st, raw or message, message, kind) then
    return
  end
  local handlers = st.on_message
  for i = 1, #handlers do handlers[i](peer, message, kind) end
end

function server_events.close(s, peer, code, reason)
  local st = servers[s]
  if not st then return end
  for _, handler in ipairs(st.on_close) do handler(peer, code, reason) end
  local pst = peer_states[peer]
  if pst then wake(pst, is_kind("drain"), nil, "closed") end
end

function server_events.drain(s, peer)
  local pst = peer_states[peer]
  if not pst then return end
  for _, handler in ipairs(pst.on_drain) do handler(peer) end
  wake(pst, is_kind("drain"), true)
end

prelude.servers, prelude.server_events = servers, server_events
