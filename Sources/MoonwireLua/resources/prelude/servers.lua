-- Servers (mw.listen) and their peers: the Lua side of each server, and the
-- dispatchers (`server_events`) Swift calls with its peers' events.

local host, prelude = ...
local mw = prelude.mw
local state_lookup, define_handlers = prelude.state_lookup, prelude.define_handlers
local without_codec, split_auto_reply, encode_message = prelude.without_codec, prelude.split_auto_reply, prelude.encode_message
local peer_states, new_peer_state, session_ended = prelude.peer_states, prelude.new_peer_state, prelude.session_ended

local servers = setmetatable({}, { __mode = "k" })
local server_methods = host.server_methods
local peer_methods = host.peer_methods

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

-- A server's state: its codec, auto_reply rules and handlers, which its peers' states
-- (`peers`, weak) follow.
local function new_server_state(codec, auto_rules)
  return { codec = codec, on_connect = {}, on_message = {}, on_close = {}, auto_rules = auto_rules or false,
           peers = setmetatable({}, { __mode = "k" }) }
end

function mw.listen(url, opts)
  prelude.check_endpoint("mw.listen", url, opts)
  local codec, auto_rules
  if opts then
    opts, codec = without_codec(opts, "mw.listen")
    auto_rules = split_auto_reply(opts, "mw.listen", codec)
  end
  local s, err = host.listen(url, opts, codec and codec.schema, codec and codec.index)
  if not s then return nil, err end
  servers[s] = new_server_state(codec, auto_rules)
  return s
end

define_handlers(server_methods, "s", { "connect", "message", "close" }, server_state, nil, prelude.handlers_changed)

-- A server the host made (moonwire listen --script) gets the Lua side mw.listen gives.
function prelude.adopt_server(s)
  servers[s] = new_server_state()
end

local raw_broadcast = server_methods.broadcast
function server_methods.broadcast(self, data, kind)
  local st = server_state(self, "s:broadcast")
  -- A codec may name its frames' kind (mw.protobuf's are binary).
  return raw_broadcast(self, encode_message(st, data, "s:broadcast"), kind or (st and st.codec and st.codec.kind))
end

local server_events = {}

-- A peer's messages and drains go to the dispatchers of every session
-- (events.message, events.drain), with the peer as the session.
function server_events.connect(s, peer, request)
  local st = servers[s]
  new_peer_state(peer, st)
  if not st then return end
  for _, handler in ipairs(st.on_connect) do handler(peer, request) end
end

function server_events.close(s, peer, code, reason)
  local st = servers[s]
  if st then
    for _, handler in ipairs(st.on_close) do handler(peer, code, reason) end
  end
  local pst = peer_states[peer]
  if pst then session_ended(pst) end
end

prelude.servers, prelude.server_events = servers, server_events
