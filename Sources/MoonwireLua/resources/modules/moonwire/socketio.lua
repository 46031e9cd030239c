-- moonwire.socketio: Socket.IO v5 over Engine.IO v4, WebSocket transport only,
-- as a client (sio.connect) and as a server for mocks (sio.listen).
--
-- Design rules:
--  * Written on the public mw API: one mw.connect per client (ready = "manual",
--    so nothing goes out before the namespaces are joined again after a
--    reconnect; auto_reply answers the server's Engine.IO ping "2" with "3" in
--    Swift, without reaching Lua), one mw.listen per server.
--  * Every wire packet is parsed in one place (parse_packet) and written in one
--    place (encode_packet), for both sides.
--  * Outside failures come back as nil, err in words; misuse raises at the
--    caller's line. A malformed packet closes that connection with an error
--    that names the protocol and the field.
--  * Everything that can pile up is bounded: events nobody waits for (INBOX),
--    emits waiting for a namespace connect (opts.buffer), acks waiting for their
--    answer (opts.max_acks), attachments of one packet (opts.max_attachments).

local mw = require "moonwire"
local json = mw.json

local M = {}

-- The prelude's helpers, given by require: misuse raised at the caller's line, the
-- check that the caller may wait (before an emit goes out), and waiters in a list
-- woken by what they wait for. Waits are futures (mw.future).
local kit = select(3, ...)
local misuse, running, wait_listed, wake_listed = kit.misuse, kit.running, kit.wait_listed, kit.wake_listed
local positive = kit.positive
local function check_options(opts, known, fname) return kit.check_options(opts, known, fname, 2) end

-- Binary data: a string marked with sio.binary(s), or any string that is not
-- valid UTF-8 (it could not be JSON text), travels as an attachment.
local BINARY = {}
BINARY.__index = BINARY
BINARY.__tostring = function(b) return "socket.io binary (" .. #b.data .. " bytes)" end

function M.binary(data)
  if type(data) ~= "string" then misuse("bad argument #1 to 'sio.binary' (string expected, got %s)", type(data)) end
  return setmetatable({ data = data }, BINARY)
end

function M.is_binary(v) return getmetatable(v) == BINARY end

local MAX_DEPTH = 100

-- `value` with every binary part replaced by a placeholder; the parts go to `atts`.
local function deconstruct(value, atts, depth)
  local t = type(value)
  if t == "string" then
    if utf8.len(value) then return value end
    atts[#atts + 1] = value
    return { _placeholder = true, num = #atts - 1 }
  end
  if t ~= "table" then return value end
  if getmetatable(value) == BINARY then
    atts[#atts + 1] = value.data
    return { _placeholder = true, num = #atts - 1 }
  end
  if depth > MAX_DEPTH then return value end
  local copy
  for k, v in pairs(value) do
    local d = deconstruct(v, atts, depth + 1)
    if d ~= v then
      if not copy then
        copy = {}
        for k2, v2 in pairs(value) do copy[k2] = v2 end
        setmetatable(copy, getmetatable(value))
      end
      copy[k] = d
    end
  end
  return copy or value
end

-- The placeholders in `value` replaced by the attachments; nil, err for a
-- placeholder that points at no attachment.
local function reconstruct(value, atts, depth)
  if type(value) ~= "table" then return value end
  if value._placeholder == true then
    local num = value.num
    if math.type(num) ~= "integer" or num < 0 or num >= #atts then
      return nil, ("placeholder num %s out of range (%d attachments)"):format(tostring(num), #atts)
    end
    return atts[num + 1]
  end
  if depth > MAX_DEPTH then return value end
  for k, v in pairs(value) do
    if type(v) == "table" then
      local r, err = reconstruct(v, atts, depth + 1)
      if r == nil then return nil, err end
      value[k] = r
    end
  end
  return value
end

-- Socket.IO packet types.
local CONNECT, DISCONNECT, EVENT, ACK, CONNECT_ERROR, BINARY_EVENT, BINARY_ACK = 0, 1, 2, 3, 4, 5, 6
local TYPE_NAMES = { [0] = "CONNECT", "DISCONNECT", "EVENT", "ACK", "CONNECT_ERROR", "BINARY_EVENT", "BINARY_ACK" }

-- Engine.IO message (type 4) carrying a Socket.IO packet:
-- 4<type>[<attachments>-][<nsp>,][<id>][<json>]
local function encode_packet(ptype, nsp, id, data, attachments)
  local parts = { "4" }
  if attachments and attachments > 0 then
    parts[2] = tostring(ptype + 3) .. attachments .. "-"
  else
    parts[2] = tostring(ptype)
  end
  if nsp ~= "/" then parts[#parts + 1] = nsp .. "," end
  if id then parts[#parts + 1] = tostring(id) end
  if data ~= nil then parts[#parts + 1] = json.encode(data) end
  return table.concat(parts)
end

-- The Socket.IO packet in Engine.IO message `s` ("4..."), or nil and why.
local function parse_packet(s)
  local ptype = s:byte(2)
  ptype = ptype and ptype - 48
  if not ptype or ptype < 0 or ptype > 6 then
    return nil, ("the packet type %q is not one of 0-6"):format(s:sub(2, 2))
  end
  local p = { type = ptype, nsp = "/", attachments = 0 }
  local pos = 3
  if ptype == BINARY_EVENT or ptype == BINARY_ACK then
    local digits, after = s:match("^(%d+)%-()", pos)
    if not digits then return nil, TYPE_NAMES[ptype] .. ": the attachment count (digits and '-') is missing" end
    if #digits > 9 then return nil, TYPE_NAMES[ptype] .. ": the attachment count " .. digits .. " is too large" end
    p.attachments, pos = tonumber(digits), after
  end
  if s:sub(pos, pos) == "/" then
    local comma = s:find(",", pos, true)
    if comma then
      p.nsp, pos = s:sub(pos, comma - 1), comma + 1
    else
      p.nsp, pos = s:sub(pos), #s + 1
    end
  end
  local id, after = s:match("^(%d+)()", pos)
  if id then
    if #id > 15 then return nil, TYPE_NAMES[ptype] .. ": the ack id " .. id .. " is too large" end
    p.id, pos = tonumber(id), after
  end
  if pos <= #s then
    local data, err = json.decode(s:sub(pos))
    if data == nil then return nil, TYPE_NAMES[ptype] .. ": the data is not JSON: " .. tostring(err) end
    p.data = data
  end
  return p
end

-- The data array of an EVENT or ACK as a packed list of arguments; with
-- `event` true, the first element must be the event name.
local function packet_args(p, event, atts)
  local data = p.data
  local what = TYPE_NAMES[p.type]
  if type(data) ~= "table" or (data[1] == nil and next(data) ~= nil) then
    return nil, what .. ": the data is not an array"
  end
  if atts and #atts > 0 then
    local err
    data, err = reconstruct(data, atts, 0)
    if data == nil then return nil, what .. ": " .. err end
  end
  local n = #data
  if event then
    if type(data[1]) ~= "string" then return nil, what .. ": the event name (the first element of the data) is not a string" end
    return data[1], table.pack(table.unpack(data, 2, n))
  end
  return table.pack(table.unpack(data, 1, n))
end

-- The args of an emit as the JSON array [event, ...] (nils as null) and its attachments.
local function pack_args(event, n, ...)
  local list = json.array({ event })
  local args = { ... }
  for i = 1, n do
    local v = args[i]
    if v == nil then v = json.null end
    list[#list + 1] = v
  end
  local atts = {}
  list = deconstruct(list, atts, 0)
  return list, atts
end

local RESERVED = { connect = true, connect_error = true, disconnect = true, disconnecting = true,
                   newListener = true, removeListener = true }

local function check_event(event, fname)
  if type(event) ~= "string" then misuse("bad argument #1 to '%s' (event name expected, got %s)", fname, type(event)) end
  if RESERVED[event] then
    misuse("bad argument #1 to '%s' (%q is reserved by Socket.IO; use on_connect / on_disconnect / on_connect_error)", fname, event)
  end
end

-- Results of a handler as an ack's data array.
local function ack_data(r)
  local list = json.array()
  for i = 1, r.n do
    local v = r[i]
    if v == nil then v = json.null end
    list[i] = v
  end
  local atts = {}
  return deconstruct(list, atts, 0), atts
end

local function unpack_result(r)
  if r.n == 0 then return true end
  return table.unpack(r, 1, r.n)
end

local INBOX = 1000

---------------------------------------------------------------------------
-- Events, handlers, acks and waiting: shared by client sockets and server sockets.
---------------------------------------------------------------------------

local Events = {}

local function init_events(s)
  s.handlers, s.any, s.inbox, s.waiters, s.acks = {}, {}, kit.inbox(INBOX), {}, {}
  s.next_ack, s.pending_acks = 0, 0
end

function Events:on(event, fn)
  check_event(event, "s:on")
  if type(fn) ~= "function" then misuse("bad argument #2 to 's:on' (function expected, got %s)", type(fn)) end
  local list = self.handlers[event]
  if not list then
    list = {}
    self.handlers[event] = list
  end
  list[#list + 1] = fn
  return self
end

function Events:on_any(fn)
  if type(fn) ~= "function" then misuse("bad argument #1 to 's:on_any' (function expected, got %s)", type(fn)) end
  self.any[#self.any + 1] = fn
  return self
end

function Events:off(event)
  check_event(event, "s:off")
  self.handlers[event] = nil
  return self
end

-- An event arrived: a waiting expect takes it, else the handlers run (each in
-- a coroutine of its own, so that it may wait), else it is kept for expect.
-- `reply(r)` answers the sender's ack request with the first handler's results.
local function deliver(s, event, args, reply)
  for i, w in ipairs(s.waiters) do
    if w.event == event then
      table.remove(s.waiters, i)
      if reply then reply(table.pack()) end
      w.future:set(args)
      return
    end
  end
  local list = s.handlers[event]
  local any = s.any
  if (list and #list > 0) or #any > 0 then
    local replied = false
    local function run(fn, ...)
      local r = table.pack(fn(...))
      if reply and not replied then
        replied = true
        reply(r)
      end
    end
    for _, fn in ipairs(list or {}) do mw.spawn(run, fn, table.unpack(args, 1, args.n)) end
    for _, fn in ipairs(any) do mw.spawn(run, fn, event, table.unpack(args, 1, args.n)) end
    return
  end
  if reply then reply(table.pack()) end
  local inbox = s.inbox
  if inbox:push({ event = event, args = args }) and inbox.dropped == 1 then
    mw.log.warn(("socket.io %s: %d events wait for s:expect and nobody handles them; dropping the oldest "
      .. "(add a handler with s:on)"):format(s.nsp, INBOX))
  end
end

-- Waits for the next event named `event` (one kept already counts); returns
-- its arguments (true when it had none), or nil, "timeout" / nil, "disconnected".
function Events:expect(event, timeout)
  if type(event) ~= "string" then misuse("bad argument #1 to 's:expect' (event name expected, got %s)", type(event)) end
  if timeout ~= nil and (type(timeout) ~= "number" or timeout < 0) then
    misuse("bad argument #2 to 's:expect' (seconds expected, got %s)", type(timeout))
  end
  local kept = self.inbox:take(function(item) return item.event == event end)
  if kept then return unpack_result(kept.args) end
  if self:_final() then return nil, self.final_reason or "disconnected" end
  local args, err = wait_listed(self.waiters, { event = event, future = mw.future("s:expect") }, timeout)
  if args == nil then return nil, err end
  return unpack_result(args)
end

-- A new ack id for `fn`, or nil, err when too many wait.
local function register_ack(s, entry)
  if s.pending_acks >= s.max_acks then
    return nil, ("too many acks pending (%d, opts.max_acks)"):format(s.max_acks)
  end
  s.next_ack = s.next_ack + 1
  s.acks[s.next_ack] = entry
  s.pending_acks = s.pending_acks + 1
  return s.next_ack
end

local function take_ack(s, id)
  local entry = s.acks[id]
  if entry then
    s.acks[id] = nil
    s.pending_acks = s.pending_acks - 1
  end
  return entry
end

local function run_ack(entry, args)
  if entry.future then
    entry.future:set(args)
  else
    mw.spawn(entry.fn, table.unpack(args, 1, args.n))
  end
end

-- Every ack still waiting ends: blocking calls return nil, `why`; callbacks are dropped.
local function drop_acks(s, why)
  local acks = s.acks
  s.acks, s.pending_acks = {}, 0
  for _, entry in pairs(acks) do
    if entry.future then entry.future:set(nil, why) end
  end
  wake_listed(s.waiters, nil, nil, why)
end

-- emit(event, ...[, fn]): with a function last, fn(...) gets the ack's arguments.
-- Returns true, or nil, err.
function Events:emit(event, ...)
  check_event(event, "s:emit")
  local n = select("#", ...)
  local fn = n > 0 and select(n, ...) or nil
  local id
  if type(fn) == "function" then
    n = n - 1
    local err
    id, err = register_ack(self, { fn = fn })
    if not id then return nil, err end
  end
  local data, atts = pack_args(event, n, ...)
  local ok, err = self:_send_packet(EVENT, id, data, atts)
  if not ok and id then take_ack(self, id) end
  return ok, err
end

-- call(event, ...): emit with an ack and wait for it; returns the ack's
-- arguments (true when it had none), or nil, "timeout" / nil, err.
local function call(s, timeout, fname, event, ...)
  check_event(event, fname)
  running(fname)
  local answer = mw.future(fname)
  local id, err = register_ack(s, { future = answer })
  if not id then return nil, err end
  local data, atts = pack_args(event, select("#", ...), ...)
  local ok
  ok, err = s:_send_packet(EVENT, id, data, atts)
  if not ok then
    take_ack(s, id)
    return nil, err
  end
  local args
  args, err = answer:wait(timeout)
  if args == nil then
    take_ack(s, id)
    return nil, err
  end
  return unpack_result(args)
end

function Events:call(event, ...)
  return call(self, self.ack_timeout, "s:call", event, ...)
end

-- s:timeout(seconds):call(...): one call with its own ack timeout.
function Events:timeout(seconds)
  if type(seconds) ~= "number" or seconds <= 0 then
    misuse("bad argument #1 to 's:timeout' (positive number expected, got %s)", type(seconds))
  end
  local s = self
  return {
    call = function(_, event, ...) return call(s, seconds, "s:timeout():call", event, ...) end,
  }
end

-- An ACK or EVENT packet arrived for this socket (args decoded, attachments in).
local function receive_packet(s, p, atts)
  if p.type == EVENT or p.type == BINARY_EVENT then
    local event, args = packet_args(p, true, atts)
    if not event then return nil, args end
    local reply
    if p.id then
      local id = p.id
      reply = function(r)
        local data, ratts = ack_data(r)
        local ok, err = s:_send_packet(ACK, id, data, ratts)
        if not ok then mw.log.warn(("socket.io %s: the ack of %q could not be sent: %s"):format(s.nsp, event, err)) end
      end
    end
    deliver(s, event, args, reply)
    return true
  end
  -- ACK / BINARY_ACK
  if not p.id then return nil, TYPE_NAMES[p.type] .. ": the ack id is missing" end
  local args, err = packet_args(p, false, atts)
  if not args then return nil, err end
  local entry = take_ack(s, p.id)
  if entry then run_ack(entry, args) end
  return true
end

local function events_stats(s)
  return { pending_acks = s.pending_acks, kept = s.inbox:count(), dropped = s.inbox.dropped }
end

---------------------------------------------------------------------------
-- Attachments: a BINARY_EVENT / BINARY_ACK is followed by its binary messages.
---------------------------------------------------------------------------

-- Feeds one message to the reassembly state `st` (client or server peer).
-- Returns the complete packet and its attachments, or nil (more is due), or
-- false, err for a protocol error.
local function reassemble(st, msg, kind)
  local pending = st.pending_binary
  if kind == "binary" then
    if not pending then
      return false, "socket.io: a binary message arrived with no BINARY_EVENT or BINARY_ACK waiting for attachments"
    end
    pending.atts[#pending.atts + 1] = msg
    if #pending.atts < pending.packet.attachments then return nil end
    st.pending_binary = nil
    return pending.packet, pending.atts
  end
  if pending then
    return false, ("socket.io: a text message arrived while %s still waited for %d of its %d attachments")
      :format(TYPE_NAMES[pending.packet.type], pending.packet.attachments - #pending.atts, pending.packet.attachments)
  end
  return nil
end

local function start_binary(st, p, max)
  if p.attachments > max then
    return false, ("socket.io: %s announces %d attachments, more than max_attachments (%d)")
      :format(TYPE_NAMES[p.type], p.attachments, max)
  end
  if p.attachments == 0 then return p, {} end
  st.pending_binary = { packet = p, atts = {} }
  return nil
end

---------------------------------------------------------------------------
-- Client
---------------------------------------------------------------------------

local Socket = setmetatable({}, { __index = Events })
Socket.__index = Socket

local Client = {}
Client.__index = Client

local urlencode = kit.url_escape

-- The Engine.IO WebSocket URL for `url` and the namespace its path names.
-- http(s):// and ws(s):// both work; a path other than the engine path
-- ("/socket.io/") names the namespace, as in the JavaScript client.
local function engine_url(url, opts)
  local scheme, rest = url:match("^(%a[%w+.-]*)://(.*)$")
  local schemes = { http = "ws", https = "wss", ws = "ws", wss = "wss" }
  scheme = scheme and schemes[scheme:lower()]
  if not scheme then
    misuse("bad argument #1 to 'sio.connect' (an http://, https://, ws:// or wss:// URL expected, got %q)", url)
  end
  local authority, path, query = rest:match("^([^/?#]*)([^?#]*)%??([^#]*)")
  if authority == "" then misuse("bad argument #1 to 'sio.connect' (no host in %q)", url) end
  local engine_path = opts.path or "/socket.io/"
  local namespace
  if path:find("socket%.io/?$") then
    engine_path = path
  elseif path ~= "" and path ~= "/" then
    namespace = path
  end
  if engine_path:sub(-1) ~= "/" then engine_path = engine_path .. "/" end
  local params = {}
  for pair in query:gmatch("[^&]+") do
    local k = pair:match("^([^=]*)")
    if k == "EIO" and pair ~= "EIO=4" then
      misuse("bad argument #1 to 'sio.connect' (this client speaks Engine.IO 4, the URL asks for %s)", pair)
    end
    if k ~= "EIO" and k ~= "transport" then params[#params + 1] = pair end
  end
  params[#params + 1] = "EIO=4"
  params[#params + 1] = "transport=websocket"
  if opts.query then
    local keys = {}
    for k in pairs(opts.query) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    for _, k in ipairs(keys) do params[#params + 1] = urlencode(k) .. "=" .. urlencode(opts.query[k]) end
  end
  return scheme .. "://" .. authority .. engine_path .. "?" .. table.concat(params, "&"), namespace
end
M._engine_url = engine_url

local CONNECT_OPTIONS = {
  namespace = true, auth = true, path = true, query = true, ack_timeout = true, max_attachments = true,
  buffer = true, max_acks = true,
  -- passed to mw.connect
  headers = true, reconnect = true, connect_timeout = true, tls = true, proxy = true, record = true,
  max_message = true, queue = true, compress = true,
}
local PASSED = { "headers", "reconnect", "connect_timeout", "tls", "proxy", "record", "max_message", "queue", "compress" }

local function check_namespace(nsp, fname)
  if type(nsp) ~= "string" or nsp:sub(1, 1) ~= "/" or nsp:find(",", 1, true) then
    misuse("bad argument #1 to '%s' (a namespace such as \"/chat\" expected, got %s)", fname,
      type(nsp) == "string" and ("%q"):format(nsp) or type(nsp))
  end
end

local function check_auth(auth, fname)
  if auth ~= nil and type(auth) ~= "table" and type(auth) ~= "function" then
    misuse("bad argument #2 to '%s' (opts.auth: a table or a function returning one expected, got %s)", fname, type(auth))
  end
end

-- A socket for namespace `nsp` on client `client`.
local function new_socket(client, nsp, auth)
  local s = setmetatable({ client = client, nsp = nsp, namespace = nsp, auth = auth, state = "connecting",
    buffer = {} }, Socket)
  init_events(s)
  s.ack_timeout, s.max_acks, s.buffer_limit = client.ack_timeout, client.max_acks, client.buffer_limit
  s.on_connect_handlers, s.on_disconnect_handlers, s.on_connect_error_handlers, s.on_reconnect_handlers = {}, {}, {}, {}
  s.connects = 0
  return s
end

function M.connect(url, opts)
  if type(url) ~= "string" then misuse("bad argument #1 to 'sio.connect' (string expected, got %s)", type(url)) end
  opts = check_options(opts, CONNECT_OPTIONS, "sio.connect")
  if opts.namespace ~= nil then check_namespace(opts.namespace, "sio.connect") end
  check_auth(opts.auth, "sio.connect")
  if opts.query ~= nil and type(opts.query) ~= "table" then
    misuse("bad argument #2 to 'sio.connect' (opts.query: table expected, got %s)", type(opts.query))
  end
  local ws_url, url_namespace = engine_url(url, opts)
  local client = setmetatable({
    url = ws_url, sockets = {}, order = {}, phase = "dialing", reconnects = 0,
    ack_timeout = positive(opts, "ack_timeout", 10, "sio.connect"),
    max_attachments = positive(opts, "max_attachments", 64, "sio.connect"),
    max_acks = positive(opts, "max_acks", 1024, "sio.connect"),
    buffer_limit = positive(opts, "buffer", 1024, "sio.connect"),
  }, Client)
  local copts = { ready = "manual", auto_reply = { match = "2", reply = "3" } }
  for _, k in ipairs(PASSED) do copts[k] = opts[k] end
  local c = mw.connect(ws_url, copts)
  client.conn = c
  c:on_open(function(_, info) client:_opened(info) end)
  c:on_message(function(_, msg, kind) client:_message(msg, kind) end)
  c:on_close(function(_, code, reason, info) client:_closed(code, reason, info) end)
  c:on_error(function(_, err)
    client.last_error = err
    mw.log.debug("socket.io: " .. err)
  end)
  local s = new_socket(client, opts.namespace or url_namespace or "/", opts.auth)
  client.sockets[s.nsp] = s
  client.order[1] = s
  return s
end

-- Another namespace on the same connection.
function Socket:of(nsp, opts)
  check_namespace(nsp, "s:of")
  opts = check_options(opts, { auth = true }, "s:of")
  check_auth(opts.auth, "s:of")
  local client = self.client
  local s = client.sockets[nsp]
  if s and s.state ~= "disconnected" and s.state ~= "refused" then return s end
  s = new_socket(client, nsp, opts.auth)
  client.sockets[nsp] = s
  client.order[#client.order + 1] = s
  if client.phase == "open" then client:_send_connect(s) end
  return s
end

kit.define_handlers(Socket, "s", { "connect", "disconnect", "connect_error", "reconnect" })

function Socket:_final() return self.state == "disconnected" or self.state == "refused" end

function Socket:connected() return self.state == "connected" end

-- Waits until the namespace is joined: true, or nil, err (refused, timeout, closed).
function Socket:wait_connected(timeout)
  if timeout ~= nil and (type(timeout) ~= "number" or timeout < 0) then
    misuse("bad argument #1 to 's:wait_connected' (seconds expected, got %s)", type(timeout))
  end
  if self.state == "connected" then return true end
  if self:_final() then return nil, self.final_reason or "disconnected" end
  return kit.wait_next(self, "joined", "s:wait_connected", timeout)
end

local function wake_connect_waiters(s, ...) kit.fire_next(s, "joined", ...) end

function Socket:_send_packet(ptype, id, data, atts)
  local client = self.client
  if self:_final() then return nil, "not connected: " .. (self.final_reason or "disconnected") end
  local text = encode_packet(ptype, self.nsp, id, data, #atts)
  if client.max_payload and #text > client.max_payload then
    return nil, ("message too large (%d bytes; the server's maxPayload is %d)"):format(#text, client.max_payload)
  end
  if self.state ~= "connected" then
    if #self.buffer >= self.buffer_limit then
      return nil, ("buffer full (%d packets wait for the namespace %s to connect; opts.buffer)"):format(self.buffer_limit, self.nsp)
    end
    self.buffer[#self.buffer + 1] = { text, atts }
    return true
  end
  return client:_write(text, atts)
end

function Client:_write(text, atts)
  local c = self.conn
  local ok, err = c:send(text, "text")
  if not ok then return nil, err end
  for _, a in ipairs(atts) do
    ok, err = c:send(a, "binary")
    if not ok then return nil, err end
  end
  return true
end

-- Leaves this namespace (DISCONNECT); the connection stays for the others, and
-- closes when none is left.
function Socket:disconnect()
  local client = self.client
  if self.state == "connected" and client.phase == "open" then
    client.conn:send_now(encode_packet(DISCONNECT, self.nsp))
  end
  self:_ended("io client disconnect", false)
  client:_close_if_idle()
end

-- No namespace left on the connection: it closes.
function Client:_close_if_idle()
  for _, s in pairs(self.sockets) do
    if not s:_final() then return end
  end
  self.conn:close()
end

-- Leaves every namespace and closes the connection.
function Socket:close()
  local client = self.client
  for _, s in ipairs(client.order) do
    if not s:_final() then s:disconnect() end
  end
  client.conn:close()
end

function Socket:stats()
  local st = events_stats(self)
  st.buffered = #self.buffer
  st.reconnects = self.client.reconnects
  return st
end

-- The socket is done (final) or waits for a reconnect. on_disconnect handlers
-- run first (for a socket that was connected), then what waits is woken.
function Socket:_ended(reason, will_reconnect)
  local was = self.state
  if will_reconnect then
    if was == "connected" then self.state = "connecting" end
  else
    if was ~= "refused" then self.state = "disconnected" end
    self.final_reason = self.final_reason or reason
    self.buffer = {}
  end
  if was == "connected" then
    for _, fn in ipairs(self.on_disconnect_handlers) do fn(self, reason, will_reconnect) end
  end
  drop_acks(self, "disconnected: " .. reason)
  if not will_reconnect then wake_connect_waiters(self, nil, self.final_reason) end
end

function Client:_opened(info)
  self.phase = "opening"
  self.reconnects = info.reconnects
  self.pending_binary = nil
end

function Client:_send_connect(s)
  local auth = s.auth
  if type(auth) == "function" then auth = auth(s) end
  s.connect_sent = true
  self.conn:send_now(encode_packet(CONNECT, s.nsp, nil, auth))
end

-- A malformed packet: that connection is closed, with the error in words.
function Client:_fail(err)
  self.protocol_error = err
  mw.log.warn(("%s (closing %s)"):format(err, self.url))
  self.conn:close(1002, "protocol error")
end

-- Every namespace whose CONNECT went out has its answer: release the queue.
function Client:_maybe_ready()
  for _, s in ipairs(self.order) do
    if s.state == "connecting" and s.connect_sent then return end
  end
  if self.conn:state() == "open" then self.conn:ready() end
end

function Client:_engine_open(text)
  local open = json.decode(text:sub(2))
  if type(open) ~= "table" then return self:_fail("engine.io: the open packet is not a JSON object") end
  if type(open.sid) ~= "string" then return self:_fail("engine.io: open packet: the sid is missing or not a string") end
  for _, key in ipairs { "pingInterval", "pingTimeout" } do
    if type(open[key]) ~= "number" or open[key] <= 0 then
      return self:_fail(("engine.io: open packet: %s is missing or not a positive number"):format(key))
    end
  end
  if open.maxPayload ~= nil and type(open.maxPayload) ~= "number" then
    return self:_fail("engine.io: open packet: maxPayload is not a number")
  end
  self.sid, self.ping_interval, self.ping_timeout, self.max_payload = open.sid, open.pingInterval, open.pingTimeout, open.maxPayload
  self.phase = "open"
  -- The server pings every pingInterval; silence for pingInterval + pingTimeout
  -- means it is gone (a WebSocket ping probes it, then the connection drops).
  self.conn:heartbeat({ interval = (open.pingInterval + open.pingTimeout) / 1000, timeout = open.pingTimeout / 1000 })
  for _, s in ipairs(self.order) do
    if s.state == "connecting" then self:_send_connect(s) end
  end
  self:_maybe_ready()
end

function Client:_namespace_packet(p, atts)
  local s = self.sockets[p.nsp]
  if not s or s:_final() then
    if p.type == CONNECT then
      -- Joined a namespace we left meanwhile: leave it again.
      self.conn:send_now(encode_packet(DISCONNECT, p.nsp))
    end
    return true
  end
  local t = p.type
  if t == CONNECT then
    if type(p.data) ~= "table" or type(p.data.sid) ~= "string" then
      return nil, "CONNECT: the sid is missing from the server's answer"
    end
    s.id, s.state, s.connect_sent = p.data.sid, "connected", false
    s.connects = s.connects + 1
    local buffered = s.buffer
    s.buffer = {}
    for _, item in ipairs(buffered) do self:_write(item[1], item[2]) end
    self:_maybe_ready()
    local info = { sid = s.id, reconnects = self.reconnects, namespace = s.nsp }
    for _, fn in ipairs(s.on_connect_handlers) do fn(s, info) end
    if s.connects > 1 then
      for _, fn in ipairs(s.on_reconnect_handlers) do fn(s, info) end
    end
    wake_connect_waiters(s, true)
  elseif t == CONNECT_ERROR then
    local data = p.data
    local message = type(data) == "table" and data.message or data
    if type(message) ~= "string" then message = "(no message)" end
    local err = ("socket.io: the server refused the namespace %s: %s"):format(s.nsp, message)
    s.state, s.connect_sent, s.final_reason = "refused", false, err
    s.error_data = type(data) == "table" and data.data or nil
    self:_maybe_ready()
    for _, fn in ipairs(s.on_connect_error_handlers) do fn(s, err, s.error_data) end
    s:_ended(err, false)
    self:_close_if_idle()
  elseif t == DISCONNECT then
    s:_ended("io server disconnect", false)
    self:_close_if_idle()
  else
    return receive_packet(s, p, atts)
  end
  return true
end

function Client:_message(msg, kind)
  local packet, atts = reassemble(self, msg, kind)
  if packet == false then return self:_fail(atts) end
  if packet == nil and kind == "binary" then return end
  if packet == nil then
    local etype = msg:sub(1, 1)
    if etype == "4" then
      local p, err = parse_packet(msg)
      if not p then return self:_fail("socket.io: " .. err) end
      if p.type == BINARY_EVENT or p.type == BINARY_ACK then
        packet, atts = start_binary(self, p, self.max_attachments)
        if packet == false then return self:_fail(atts) end
        if packet == nil then return end
      else
        packet, atts = p, nil
      end
    elseif etype == "0" then
      return self:_engine_open(msg)
    elseif etype == "1" or etype == "3" or etype == "6" or etype == "2" then
      -- close (the socket closes next), pong, noop; "2" with a payload is a probe.
      return
    else
      return self:_fail(("engine.io: unknown packet type %q"):format(etype))
    end
  end
  local ok, err = self:_namespace_packet(packet, atts)
  if not ok then self:_fail("socket.io: " .. err) end
end

function Client:_closed(code, reason, info)
  self.phase = info.will_reconnect and "dialing" or "closed"
  self.pending_binary = nil
  local why
  if self.protocol_error then
    why = self.protocol_error
  elseif info.will_reconnect then
    why = "transport close"
  else
    why = self.last_error and ("transport error: " .. self.last_error) or ("transport close (" .. tostring(code) .. ")")
  end
  for _, s in ipairs(self.order) do
    if not s:_final() then s:_ended(why, info.will_reconnect) end
  end
end

---------------------------------------------------------------------------
-- Server (for mocks): namespaces, rooms, acks, binary, ping
---------------------------------------------------------------------------

local Server = {}
Server.__index = Server
local Namespace = {}
Namespace.__index = Namespace
local ServerSocket = setmetatable({}, { __index = Events })
ServerSocket.__index = ServerSocket

local LISTEN_OPTIONS = {
  ping_interval = true, ping_timeout = true, max_payload = true, max_attachments = true, ack_timeout = true,
  max_acks = true, buffer = true,
  -- passed to mw.listen
  tls = true, max_message = true, queue = true, compress = true, handshake_timeout = true,
}

local sid_counter = 0
local function new_sid()
  sid_counter = sid_counter + 1
  return (mw.base64(string.pack(">I4I4", math.random(0, 0xffffffff), sid_counter)):gsub("[+/=]", { ["+"] = "-", ["/"] = "_", ["="] = "" }))
end

-- sio.listen(url [, opts]) -> server, or nil, err when it cannot bind.
function M.listen(url, opts)
  if type(url) ~= "string" then misuse("bad argument #1 to 'sio.listen' (string expected, got %s)", type(url)) end
  opts = check_options(opts, LISTEN_OPTIONS, "sio.listen")
  local server = setmetatable({
    namespaces = {}, clients = {},
    ping_interval = positive(opts, "ping_interval", 25, "sio.listen"),
    ping_timeout = positive(opts, "ping_timeout", 20, "sio.listen"),
    max_payload = positive(opts, "max_payload", 1000000, "sio.listen"),
    max_attachments = positive(opts, "max_attachments", 64, "sio.listen"),
    ack_timeout = positive(opts, "ack_timeout", 10, "sio.listen"),
    max_acks = positive(opts, "max_acks", 1024, "sio.listen"),
    buffer_limit = positive(opts, "buffer", 1024, "sio.listen"),
  }, Server)
  local lopts = {
    tls = opts.tls, max_message = opts.max_message or server.max_payload, queue = opts.queue,
    compress = opts.compress, handshake_timeout = opts.handshake_timeout,
  }
  local listener, err = mw.listen(url, lopts)
  if not listener then return nil, err end
  server.listener = listener
  listener:on_connect(function(peer, request) server:_accept(peer, request) end)
  listener:on_message(function(peer, msg, kind) server:_message(peer, msg, kind) end)
  listener:on_close(function(peer) server:_peer_closed(peer) end)
  server.pinger = mw.every(server.ping_interval, function() server:_ping_all() end)
  server:of("/")
  return server
end

-- The listening URL as a Socket.IO client takes it (ws://host:port/).
function Server:url() return self.listener:url() end

function Server:close()
  self.pinger:cancel()
  self.listener:close()
end

-- The namespace `nsp`, made on first use.
function Server:of(nsp)
  check_namespace(nsp, "server:of")
  local n = self.namespaces[nsp]
  if not n then
    n = setmetatable({ server = self, name = nsp, sockets = {}, rooms = {}, on_connect_handlers = {} }, Namespace)
    self.namespaces[nsp] = n
  end
  return n
end

-- The default namespace's methods on the server itself.
for _, name in ipairs { "on_connect", "emit", "to", "sockets" } do
  Server[name] = function(self, ...) return self.namespaces["/"][name](self.namespaces["/"], ...) end
end

-- on_connect(fn(socket, auth)): a handler returning false (and a message)
-- refuses the connection with CONNECT_ERROR.
kit.define_handlers(Namespace, "nsp", { "connect" })

function Namespace:sockets()
  local list = {}
  for _, s in pairs(self.sockets) do list[#list + 1] = s end
  table.sort(list, function(a, b) return a.id < b.id end)
  return list
end

-- The packet (text and attachments) of an event to many sockets, written once.
local function broadcast_packet(nsp, event, n, ...)
  if n > 0 and type(select(n, ...)) == "function" then
    misuse("bad argument #%d to 'emit' (a broadcast takes no ack callback)", n + 1)
  end
  local data, atts = pack_args(event, n, ...)
  return encode_packet(EVENT, nsp, nil, data, #atts), atts
end

-- Sends a written packet to every socket of `targets` (a set) but `except`;
-- returns how many took it.
local function send_to(targets, except, text, atts)
  local count = 0
  for s in pairs(targets) do
    if s ~= except and s.state == "connected" and s.engine:write(text, atts) then count = count + 1 end
  end
  return count
end

function Namespace:emit(event, ...)
  check_event(event, "nsp:emit")
  local text, atts = broadcast_packet(self.name, event, select("#", ...), ...)
  local all = {}
  for _, s in pairs(self.sockets) do all[s] = true end
  return send_to(all, nil, text, atts)
end

-- to(room [, except]): emit to the sockets in `room` (but `except`).
local function room_target(nsp, room, except)
  return {
    emit = function(_, event, ...)
      check_event(event, "to():emit")
      local text, atts = broadcast_packet(nsp.name, event, select("#", ...), ...)
      return send_to(nsp.rooms[room] or {}, except, text, atts)
    end,
  }
end

function Namespace:to(room)
  if type(room) ~= "string" then misuse("bad argument #1 to 'nsp:to' (room name expected, got %s)", type(room)) end
  return room_target(self, room)
end

function ServerSocket:to(room)
  if type(room) ~= "string" then misuse("bad argument #1 to 'socket:to' (room name expected, got %s)", type(room)) end
  return room_target(self.namespace, room, self)
end

function ServerSocket:join(room)
  if type(room) ~= "string" then misuse("bad argument #1 to 'socket:join' (room name expected, got %s)", type(room)) end
  local rooms = self.namespace.rooms
  rooms[room] = rooms[room] or {}
  rooms[room][self] = true
  self.rooms[room] = true
  return self
end

function ServerSocket:leave(room)
  if type(room) ~= "string" then misuse("bad argument #1 to 'socket:leave' (room name expected, got %s)", type(room)) end
  local members = self.namespace.rooms[room]
  if members then
    members[self] = nil
    if next(members) == nil then self.namespace.rooms[room] = nil end
  end
  self.rooms[room] = nil
  return self
end

kit.define_handlers(ServerSocket, "socket", { "disconnect" })

function ServerSocket:_final() return self.state == "disconnected" end

function ServerSocket:connected() return self.state == "connected" end

function ServerSocket:_send_packet(ptype, id, data, atts)
  if self.state == "disconnected" then return nil, "not connected: " .. (self.final_reason or "disconnected") end
  local text = encode_packet(ptype, self.nsp, id, data, #atts)
  if self.state ~= "connected" then
    if #self.buffer >= self.buffer_limit then return nil, "buffer full" end
    self.buffer[#self.buffer + 1] = { text, atts }
    return true
  end
  return self.engine:write(text, atts)
end

-- The socket leaves its namespace (rooms too); `notify` sends DISCONNECT.
function ServerSocket:_gone(reason, notify)
  if self.state == "disconnected" then return end
  if notify and self.engine.open then self.engine.peer:send(encode_packet(DISCONNECT, self.nsp), "text") end
  self.state, self.final_reason = "disconnected", reason
  for room in pairs(self.rooms) do self:leave(room) end
  self.namespace.sockets[self.id] = nil
  self.engine.sockets[self.nsp] = nil
  for _, fn in ipairs(self.on_disconnect_handlers) do fn(self, reason) end
  drop_acks(self, "disconnected: " .. reason)
end

-- The server disconnects this socket from its namespace.
function ServerSocket:disconnect()
  self:_gone("server namespace disconnect", true)
end

function ServerSocket:stats() return events_stats(self) end

-- One Engine.IO connection (a peer of the listener).
local Engine = {}
Engine.__index = Engine

function Engine:write(text, atts)
  local ok, err = self.peer:send(text, "text")
  if not ok then return nil, err end
  for _, a in ipairs(atts) do
    ok, err = self.peer:send(a, "binary")
    if not ok then return nil, err end
  end
  return true
end

function Engine:fail(err)
  mw.log.warn(("%s (closing peer %s)"):format(err, tostring(self.peer.id)))
  self.peer:close(1002, "protocol error")
end

function Server:_accept(peer, request)
  local path = request.path or ""
  local query = path:match("%?(.*)$") or ""
  local eio = query:match("EIO=(%d+)")
  if eio ~= nil and eio ~= "4" then
    mw.log.warn(("socket.io server: peer %s asks for Engine.IO %s; this server speaks 4"):format(tostring(peer.id), eio))
    peer:close(1002, "Engine.IO 4 only")
    return
  end
  local engine = setmetatable({ peer = peer, server = self, sid = new_sid(), sockets = {}, open = true,
    handshake = request, pinged = 0, ponged = 0 }, Engine)
  self.clients[peer] = engine
  peer:send("0" .. json.encode({ sid = engine.sid, upgrades = json.array(), pingInterval = math.floor(self.ping_interval * 1000),
    pingTimeout = math.floor(self.ping_timeout * 1000), maxPayload = math.floor(self.max_payload) }), "text")
end

-- A ping to every client that answered the last one; each ping's own timer
-- closes a client that has not answered it within ping_timeout.
function Server:_ping_all()
  local timeout = self.ping_timeout
  for _, engine in pairs(self.clients) do
    if engine.pinged == engine.ponged then
      local seq = engine.pinged + 1
      engine.pinged = seq
      engine.peer:send("2", "text")
      mw.after(timeout, function()
        if engine.ponged < seq and engine.open then
          mw.log.info(("socket.io server: peer %s did not answer a ping within %g s: closing"):format(tostring(engine.peer.id), timeout))
          engine.peer:close(1000, "ping timeout")
        end
      end)
    end
  end
end

function Server:_connect_socket(engine, p)
  local nsp = self.namespaces[p.nsp]
  if not nsp then
    engine.peer:send(encode_packet(CONNECT_ERROR, p.nsp, nil, { message = "Invalid namespace" }), "text")
    return true
  end
  if engine.sockets[p.nsp] then return nil, "CONNECT: the namespace " .. p.nsp .. " is already connected" end
  local auth = p.data
  if auth ~= nil and type(auth) ~= "table" then return nil, "CONNECT: the auth payload is not an object" end
  local s = setmetatable({ engine = engine, namespace = nsp, nsp = p.nsp, id = new_sid(), rooms = {}, state = "connecting",
    buffer = {}, on_disconnect_handlers = {}, auth = auth,
    handshake = { auth = auth, headers = engine.handshake.headers, path = engine.handshake.path,
                  remote_address = engine.handshake.remote_address } }, ServerSocket)
  init_events(s)
  s.ack_timeout, s.max_acks, s.buffer_limit = self.ack_timeout, self.max_acks, self.buffer_limit
  engine.sockets[p.nsp] = s
  for _, fn in ipairs(nsp.on_connect_handlers) do
    local ok, message = fn(s, auth or {})
    if ok == false then
      engine.sockets[p.nsp] = nil
      engine.peer:send(encode_packet(CONNECT_ERROR, p.nsp, nil, { message = tostring(message or "refused") }), "text")
      return true
    end
  end
  nsp.sockets[s.id] = s
  s:join(s.id)
  engine.peer:send(encode_packet(CONNECT, p.nsp, nil, { sid = s.id }), "text")
  s.state = "connected"
  local buffered = s.buffer
  s.buffer = {}
  for _, item in ipairs(buffered) do engine:write(item[1], item[2]) end
  return true
end

function Server:_message(peer, msg, kind)
  local engine = self.clients[peer]
  if not engine then return end
  local packet, atts = reassemble(engine, msg, kind)
  if packet == false then return engine:fail(atts) end
  if packet == nil and kind == "binary" then return end
  if packet == nil then
    local etype = msg:sub(1, 1)
    if etype == "3" then
      engine.ponged = engine.pinged
      return
    elseif etype == "2" then
      peer:send("3" .. msg:sub(2), "text")
      return
    elseif etype == "1" then
      peer:close()
      return
    elseif etype == "6" then
      return
    elseif etype ~= "4" then
      return engine:fail(("engine.io: unknown packet type %q"):format(etype))
    end
    local p, err = parse_packet(msg)
    if not p then return engine:fail("socket.io: " .. err) end
    if p.type == BINARY_EVENT or p.type == BINARY_ACK then
      packet, atts = start_binary(engine, p, self.max_attachments)
      if packet == false then return engine:fail(atts) end
      if packet == nil then return end
    else
      packet = p
    end
  end
  local ok, err
  if packet.type == CONNECT then
    ok, err = self:_connect_socket(engine, packet)
  else
    local s = engine.sockets[packet.nsp]
    if not s then
      mw.log.warn(("socket.io server: peer %s sent %s to the namespace %s it has not joined: ignored")
        :format(tostring(peer.id), TYPE_NAMES[packet.type], packet.nsp))
      return
    end
    if packet.type == DISCONNECT then
      s:_gone("client namespace disconnect", false)
      ok = true
    elseif packet.type == CONNECT_ERROR then
      ok, err = nil, "CONNECT_ERROR is not a packet a client sends"
    else
      ok, err = receive_packet(s, packet, atts)
    end
  end
  if not ok then engine:fail("socket.io: " .. err) end
end

function Server:_peer_closed(peer)
  local engine = self.clients[peer]
  if not engine then return end
  self.clients[peer] = nil
  engine.open = false
  for _, s in pairs(engine.sockets) do s:_gone("transport close", false) end
end


return M
