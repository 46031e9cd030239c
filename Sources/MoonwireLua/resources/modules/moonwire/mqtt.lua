-- moonwire.mqtt: MQTT 3.1.1 and 5.0 clients, and a small broker for mock servers,
-- written on the public mw API (mw.connect, mw.listen), over WebSocket (subprotocol
-- "mqtt") and plain TCP. docs/protocols/mqtt.md is the reference.
--
-- How it sits on the core:
--  * One connection (mw.connect) per client, kind = "binary", ready = "manual": the
--    CONNECT goes out with c:send_now in on_open, and what the script sent while the
--    session was down waits in the connection's queue until the CONNACK (c:ready()).
--  * MQTT packets do not line up with WebSocket messages (several in one, one across
--    several) nor with TCP reads ("raw" framing): every inbound chunk goes through one
--    bounded reassembly buffer (max_packet), and the packets are dispatched from it.
--  * The keep-alive is the connection's heartbeat with PINGREQ as its message: it goes
--    out after keepalive seconds of silence, and any packet from the broker answers it
--    (the PINGRESP is swallowed here: the script never sees it).
--  * Waiting (publish at QoS 1/2, subscribe, expect) suspends the calling coroutine
--    here, in Lua; packets and timers resume it.
local mw = require "moonwire"

local M = {}
local spawn = mw.spawn

local spack, sunpack, schar, sbyte, ssub = string.pack, string.unpack, string.char, string.byte, string.sub
local concat = table.concat

-- Packet types, by number and by name; declared once.
local TYPES = { "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP",
  "SUBSCRIBE", "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT", "AUTH" }
local T = {}
for n, name in ipairs(TYPES) do T[name] = n end

-- 3.1.1 CONNACK return codes and 5.0 reason codes, in words.
local RETURN_CODES = { "unacceptable protocol version", "identifier rejected", "server unavailable",
  "bad user name or password", "not authorized" }
local REASONS = {
  [0x00] = "success", [0x01] = "granted QoS 1", [0x02] = "granted QoS 2", [0x04] = "disconnect with will message",
  [0x10] = "no matching subscribers", [0x11] = "no subscription existed", [0x18] = "continue authentication",
  [0x19] = "re-authenticate", [0x80] = "unspecified error", [0x81] = "malformed packet", [0x82] = "protocol error",
  [0x83] = "implementation specific error", [0x84] = "unsupported protocol version",
  [0x85] = "client identifier not valid", [0x86] = "bad user name or password", [0x87] = "not authorized",
  [0x88] = "server unavailable", [0x89] = "server busy", [0x8A] = "banned", [0x8B] = "server shutting down",
  [0x8C] = "bad authentication method", [0x8D] = "keep alive timeout", [0x8E] = "session taken over",
  [0x8F] = "topic filter invalid", [0x90] = "topic name invalid", [0x91] = "packet identifier in use",
  [0x92] = "packet identifier not found", [0x93] = "receive maximum exceeded", [0x94] = "topic alias invalid",
  [0x95] = "packet too large", [0x96] = "message rate too high", [0x97] = "quota exceeded",
  [0x98] = "administrative action", [0x99] = "payload format invalid", [0x9A] = "retain not supported",
  [0x9B] = "QoS not supported", [0x9C] = "use another server", [0x9D] = "server moved",
  [0x9E] = "shared subscriptions not supported", [0x9F] = "connection rate exceeded",
  [0xA0] = "maximum connect time", [0xA1] = "subscription identifiers not supported",
  [0xA2] = "wildcard subscriptions not supported",
}
local function reason_text(code)
  return ("%s (0x%02X)"):format(REASONS[code] or "unknown reason", code)
end

-- MQTT 5.0 properties: id, name, wire type. Encoding and decoding both derive from it.
local PROPERTIES = {
  { 0x01, "payload_format_indicator", "u8" }, { 0x02, "message_expiry_interval", "u32" },
  { 0x03, "content_type", "str" }, { 0x08, "response_topic", "str" }, { 0x09, "correlation_data", "bin" },
  { 0x0B, "subscription_identifier", "varint" }, { 0x11, "session_expiry_interval", "u32" },
  { 0x12, "assigned_client_identifier", "str" }, { 0x13, "server_keep_alive", "u16" },
  { 0x15, "authentication_method", "str" }, { 0x16, "authentication_data", "bin" },
  { 0x17, "request_problem_information", "u8" }, { 0x18, "will_delay_interval", "u32" },
  { 0x19, "request_response_information", "u8" }, { 0x1A, "response_information", "str" },
  { 0x1C, "server_reference", "str" }, { 0x1F, "reason_string", "str" }, { 0x21, "receive_maximum", "u16" },
  { 0x22, "topic_alias_maximum", "u16" }, { 0x23, "topic_alias", "u16" }, { 0x24, "maximum_qos", "u8" },
  { 0x25, "retain_available", "u8" }, { 0x26, "user_property", "pair" }, { 0x27, "maximum_packet_size", "u32" },
  { 0x28, "wildcard_subscription_available", "u8" }, { 0x29, "subscription_identifier_available", "u8" },
  { 0x2A, "shared_subscription_available", "u8" },
}
local PROP_BY_ID, PROP_BY_NAME = {}, {}
for _, p in ipairs(PROPERTIES) do
  PROP_BY_ID[p[1]] = p
  PROP_BY_NAME[p[2]] = p
end

-- The largest remaining length four varint bytes can say (MQTT's own limit).
local MAX_REMAINING = 268435455

---------------------------------------------------------------------------------------
-- The prelude's helpers, given by require: misuse raised at the script's line (frames
-- of moonwire's own Lua, chunks named "@moonwire/...", are passed over), the check that
-- the caller may wait, and resume for the handler coroutines kept here.
local kit = select(3, ...)
local misuse, bad_argument, running, resume = kit.misuse, kit.bad_argument, kit.running, kit.resume

---------------------------------------------------------------------------------------
-- Encoding.

local function varint(n)
  if n < 128 then return schar(n) end
  local out = {}
  repeat
    local byte = n % 128
    n = n // 128
    out[#out + 1] = schar(n > 0 and byte + 128 or byte)
  until n == 0
  return concat(out)
end

local function packet(kind, flags, body)
  return schar(kind << 4 | flags) .. varint(#body) .. body
end

local function encode_properties(props)
  if not props then return "\0" end
  local out = {}
  for name, value in pairs(props) do
    local p = PROP_BY_NAME[name]
    if not p then misuse("unknown MQTT 5 property '%s'", tostring(name)) end
    local id, kind = p[1], p[3]
    if kind == "pair" then
      -- user_property: { key = value, ... } or a list of { key, value } (keys may repeat).
      for k, v in pairs(value) do
        if type(v) == "table" then k, v = v[1], v[2] end
        out[#out + 1] = spack(">Bs2s2", id, tostring(k), tostring(v))
      end
    elseif kind == "str" or kind == "bin" then
      out[#out + 1] = spack(">Bs2", id, tostring(value))
    elseif kind == "varint" then
      out[#out + 1] = schar(id) .. varint(value)
    else
      out[#out + 1] = spack(kind == "u8" and ">BB" or kind == "u16" and ">BI2" or ">BI4", id, value)
    end
  end
  local body = concat(out)
  return varint(#body) .. body
end

---------------------------------------------------------------------------------------
-- Decoding: a reader over one packet's body. A field that runs past the packet, or
-- does not hold what it must, raises a `malformed` value that names the packet and the
-- field; the caller turns it into the connection's error.

local MALFORMED = {}
local function malformed(text) error(setmetatable({ text = text }, MALFORMED), 0) end

local Reader = {}
Reader.__index = Reader

local function reader(s, pos, stop, name)
  return setmetatable({ s = s, pos = pos, stop = stop, name = name }, Reader)
end

function Reader:fail(field, what)
  malformed(("MQTT %s: %s %s"):format(self.name, field, what or "runs past the end of the packet"))
end
function Reader:left() return self.stop - self.pos + 1 end
function Reader:u8(field)
  if self.pos > self.stop then self:fail(field) end
  local v = sbyte(self.s, self.pos)
  self.pos = self.pos + 1
  return v
end
-- A big-endian integer of `size` bytes (string.pack's ">I2", ">I4").
local function unsigned(size)
  local format = ">I" .. size
  return function(self, field)
    if self.pos + size - 1 > self.stop then self:fail(field) end
    local v = sunpack(format, self.s, self.pos)
    self.pos = self.pos + size
    return v
  end
end
Reader.u16, Reader.u32 = unsigned(2), unsigned(4)
function Reader:varint(field)
  local n, mult = 0, 1
  for _ = 1, 4 do
    local b = self:u8(field)
    n = n + (b & 127) * mult
    if b < 128 then return n end
    mult = mult * 128
  end
  self:fail(field, "is a variable byte integer longer than 4 bytes")
end
function Reader:bin(field)
  local n = self:u16(field .. " length")
  if self.pos + n - 1 > self.stop then
    self:fail(field, ("length %d runs past the end of the packet (%d bytes left)"):format(n, self:left()))
  end
  local v = ssub(self.s, self.pos, self.pos + n - 1)
  self.pos = self.pos + n
  return v
end
function Reader:str(field)
  local v = self:bin(field)
  if not utf8.len(v) then self:fail(field, "is not valid UTF-8") end
  return v
end
function Reader:rest()
  local v = ssub(self.s, self.pos, self.stop)
  self.pos = self.stop + 1
  return v
end
function Reader:properties()
  local length = self:varint("property length")
  local stop = self.pos + length - 1
  if stop > self.stop then self:fail("property length", ("%d runs past the end of the packet"):format(length)) end
  local props = {}
  while self.pos <= stop do
    local id = self:varint("property identifier")
    local p = PROP_BY_ID[id]
    if not p then self:fail("property identifier", ("0x%02X is not an MQTT 5 property"):format(id)) end
    local name, kind = p[2], p[3]
    local value
    if kind == "u8" then value = self:u8(name)
    elseif kind == "u16" then value = self:u16(name)
    elseif kind == "u32" then value = self:u32(name)
    elseif kind == "varint" then value = self:varint(name)
    elseif kind == "str" then value = self:str(name)
    elseif kind == "bin" then value = self:bin(name)
    else
      local k = self:str(name .. " key")
      value = { k, self:str(name .. " value") }
    end
    if kind == "pair" or name == "subscription_identifier" then
      local list = props[name] or {}
      list[#list + 1] = value
      props[name] = list
    else
      props[name] = value
    end
  end
  if self.pos ~= stop + 1 then self:fail("properties", "do not end where the property length says") end
  return props
end
function Reader:done()
  if self.pos <= self.stop then self:fail("packet", ("has %d bytes after its last field"):format(self:left()), true) end
end

-- Reassembly: chunks (WebSocket messages, TCP reads) in, whole packets out. What
-- does not make a whole packet yet waits in `st.parts` (at most one packet: max_packet
-- bytes plus its fixed header), joined only once the packet it needs is all there.
-- Calls on_packet(kind, flags, s, first, last) for each packet, where the body is
-- s:sub(first, last); returns nil, err for a malformed fixed header.
local function feed(st, chunk, on_packet)
  local s = chunk
  local parts = st.parts
  if parts[1] then
    parts[#parts + 1] = chunk
    st.have = st.have + #chunk
    if st.have < st.need then return true end
    s = concat(parts)
    st.parts, st.have, st.need = {}, 0, 0
  end
  local pos, n = 1, #s
  while n - pos + 1 >= 2 do
    local first = sbyte(s, pos)
    local length, mult, i, b = 0, 1, pos + 1
    repeat
      b = sbyte(s, i)
      if not b then break end
      length = length + (b & 127) * mult
      mult = mult * 128
      i = i + 1
    until b < 128 or i - pos > 4
    if not b then break end -- the length itself is not all here yet
    if b >= 128 then return nil, "MQTT: malformed remaining length (more than 4 bytes)" end
    if length > st.max_packet then
      return nil, ("MQTT: remaining length %d is larger than max_packet (%d bytes)"):format(length, st.max_packet)
    end
    local last = i + length - 1
    if last > n then
      st.need = last - pos + 1
      break
    end
    local kind = first >> 4
    if kind == 0 then return nil, "MQTT: packet type 0 is reserved (not an MQTT packet)" end
    on_packet(kind, first & 15, s, i, last)
    if st.stopped then return true end
    pos = last + 1
  end
  if pos <= n then
    local rest = pos == 1 and s or ssub(s, pos)
    st.parts[1], st.have = rest, #rest
    -- A fixed header cut short: the next chunk decides.
    if st.need <= st.have then st.need = st.have + 1 end
  end
  return true
end

---------------------------------------------------------------------------------------
-- Topic filters: "+" one level, "#" this level and every one below; a topic that
-- starts with "$" is not matched by a wildcard in the first level.

local function check_filter(filter, fname)
  if type(filter) ~= "string" or filter == "" then bad_argument(1, fname, "topic filter (non-empty string)", filter) end
  local levels = {}
  for level in (filter .. "/"):gmatch("([^/]*)/") do levels[#levels + 1] = level end
  for i, level in ipairs(levels) do
    if level:find("#", 1, true) and (level ~= "#" or i ~= #levels) then
      misuse("bad argument #1 to '%s' (topic filter '%s': '#' must be a whole level, the last one)", fname, filter)
    end
    if level:find("+", 1, true) and level ~= "+" then
      misuse("bad argument #1 to '%s' (topic filter '%s': '+' must be a whole level)", fname, filter)
    end
  end
  return levels
end

-- A function(topic) -> bool for a checked filter.
local function filter_matcher(filter, levels)
  if not filter:find("[+#]") then return function(t) return t == filter end end
  local multi = levels[#levels] == "#"
  local parts = {}
  for i = 1, #levels - (multi and 1 or 0) do
    local level = levels[i]
    parts[i] = level == "+" and "[^/]*" or level:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
  end
  local prefix = "^" .. concat(parts, "/")
  local exact, below = prefix .. "$", #parts > 0 and prefix .. "/" or "^"
  local wild_first = levels[1] == "+" or levels[1] == "#"
  return function(t)
    if wild_first and sbyte(t, 1) == 36 then return false end
    if t:find(exact) then return true end
    return multi and t:find(below) ~= nil
  end
end

function M.topic_matches(filter, topic)
  if type(topic) ~= "string" then bad_argument(2, "mqtt.topic_matches", "string", topic) end
  return filter_matcher(filter, check_filter(filter, "mqtt.topic_matches"))(topic)
end

---------------------------------------------------------------------------------------
-- Waiting. The calling coroutine waits in its waiter's future (mw.future); a packet, a
-- timer or the end of the connection sets it with the result. A waiter is a key of
-- `list` (a set) while it waits.

local function waiter(fname, list, match)
  local w = { future = mw.future(fname), list = list, match = match }
  if list then list[w] = true end
  return w
end

local function settle(w, ...)
  if w.list then w.list[w] = nil end
  w.future:set(...)
end

local function outcome(w, timeout_text, ...)
  if w.future:is_set() then return ... end
  if w.list then w.list[w] = nil end
  return nil, timeout_text
end

-- Waits until settle(w, ...) and returns what it got; nil, timeout_text after `timeout`.
local function wait(w, timeout, timeout_text)
  return outcome(w, timeout_text, w.future:wait(timeout))
end

local function settle_all(list, ...)
  local ws = {}
  for w in pairs(list) do ws[#ws + 1] = w end
  for _, w in ipairs(ws) do settle(w, ...) end
end

---------------------------------------------------------------------------------------
-- The client.

local Client = {}
Client.__index = Client

local CONNECT_OPTIONS = {
  client_id = "string", keepalive = "number", clean = "boolean", username = "string", password = "string",
  will = "table", version = "number", timeout = "number", max_inflight = "number", max_packet = "number",
  inbox = "number", session_expiry = "number", properties = "table", reconnect = "table|boolean",
  tls = "table", headers = "table", proxy = "string|boolean", connect_timeout = "number", queue = "table",
  record = "string",
}
local PASSED_ON = { "reconnect", "tls", "headers", "proxy", "connect_timeout", "queue", "record" }

local function check_options(opts, allowed, fname)
  for k, v in pairs(opts) do
    local want = allowed[k]
    if not want then misuse("bad argument #2 to '%s' (unknown option 'opts.%s')", fname, tostring(k)) end
    if not want:find(type(v), 1, true) then
      misuse("bad argument #2 to '%s' (opts.%s: %s expected, got %s)", fname, k, want:gsub("|", " or "), type(v))
    end
  end
end

-- mqtt://, mqtts:// are spelled as the core spells them, with MQTT's ports (1883,
-- 8883) when the URL has none.
local function transport_url(url)
  local scheme, rest = url:match("^(%a+)://(.*)$")
  if scheme == "mqtt" or scheme == "mqtts" then
    local host, tail = rest:match("^([^/]*)(.*)$")
    if not host:find(":%d+$") then host = host .. (scheme == "mqtt" and ":1883" or ":8883") end
    return (scheme == "mqtt" and "tcp://" or "tls://") .. host .. tail, true
  end
  if scheme == "tcp" or scheme == "tls" then return url, true end
  if scheme == "ws" or scheme == "wss" then return url, false end
  return nil
end

local function connect_packet(self)
  local o = self.opts
  local v5 = self.version == 5
  local flags = self.clean and 0x02 or 0
  local will_part = ""
  if o.will then
    local w = o.will
    local qos = w.qos or 0
    flags = flags | 0x04 | (qos << 3) | (w.retain and 0x20 or 0)
    will_part = (v5 and encode_properties(w.properties) or "") .. spack(">s2s2", w.topic, w.payload or "")
  end
  if o.username then flags = flags | 0x80 end
  if o.password then flags = flags | 0x40 end
  local props = ""
  if v5 then
    local p = {}
    for k, v in pairs(o.properties or {}) do p[k] = v end
    if p.session_expiry_interval == nil then p.session_expiry_interval = self.session_expiry end
    if p.maximum_packet_size == nil then p.maximum_packet_size = self.max_packet + 5 end
    props = encode_properties(p)
  end
  local body = spack(">s2BBI2", "MQTT", self.version, flags, self.keepalive) .. props
    .. spack(">s2", self.client_id) .. will_part
    .. (o.username and spack(">s2", o.username) or "") .. (o.password and spack(">s2", o.password) or "")
  return packet(T.CONNECT, 0, body)
end

-- Runs the script's on_<event> handlers, then resumes the coroutines in m:wait(event).
-- True when the script heard it (an error nobody heard is logged).
local function handlers(self, event, ...)
  local list = self.handlers[event]
  if list then
    for _, fn in ipairs(list) do fn(self, ...) end
  end
  local waiters = self.event_waiters[event]
  if waiters and next(waiters) then
    settle_all(waiters, ...)
    return true
  end
  return list ~= nil
end

-- A protocol error from the broker: the connection is closed for good (a broker
-- that sends garbage would send it again after a reconnect), everything waiting
-- gets `err`, and the script hears it (on_error, else a warning).
local function fail(self, err)
  if self.failed then return end
  self.failed = err
  self.last_error = err
  self.reader.stopped = true
  self.conn:close(self.ws and 1002 or 1000, #err <= 123 and err or err:sub(1, 120) .. "...")
  -- Before the first CONNACK, mqtt.connect returns the error itself.
  if not handlers(self, "error", err) and self.connects > 0 then mw.log.warn(("mqtt %s: %s"):format(self.url, err)) end
  settle_all(self.waiting, nil, err)
end

local function send_control(self, bytes)
  return self.conn:send_now(bytes)
end

-- A slot in the packet id space (1..65535), shared by publishes and (un)subscribes.
local function next_id(self)
  local id = self.last_id
  for _ = 1, 65535 do
    id = id % 65535 + 1
    if not self.ids[id] then
      self.last_id = id
      return id
    end
  end
  return nil
end

-- Handlers run in coroutines of their own, so that they may wait. A coroutine that
-- ran its handler to the end parks in the client's pool (at most IDLE_RUNNERS) and
-- runs the next one: a new coroutine for each message cost more than a short handler
-- (measured: 1.3 of 3.3 us per received message).
local IDLE_RUNNERS = 16

local function runner(idle, fn, a, b)
  while true do
    fn(a, b)
    if #idle >= IDLE_RUNNERS then return end
    idle[#idle + 1] = coroutine.running()
    fn, a, b = coroutine.yield()
  end
end

local function run_handler(self, fn, a, b)
  local idle = self.idle
  local n = #idle
  if n == 0 then return spawn(runner, idle, fn, a, b) end
  local co = idle[n]
  idle[n] = nil
  resume(co, fn, a, b)
end

local function deliver(self, msg)
  self.received = self.received + 1
  local topic, routed = msg.topic, false
  for _, sub in ipairs(self.subs) do
    if sub.handler and sub.match(topic) then
      routed = true
      -- A coroutine each, so that a handler may wait (publish at QoS 1, expect).
      run_handler(self, sub.handler, msg, self)
    end
  end
  if routed then return end
  for w in pairs(self.expecting) do
    if not w.future:is_set() and w.match(msg) then
      self.expecting[w] = nil
      settle(w, msg)
      return
    end
  end
  local on_message = self.handlers.message
  if on_message then
    for _, fn in ipairs(on_message) do run_handler(self, fn, self, msg) end
    return
  end
  if self.inbox:push(msg) and self.inbox.dropped == 1 then
    mw.log.warn(("mqtt %s: the inbox is full (%d messages nobody took: no handler, expect or receive);"
      .. " dropping the oldest, counted in m:stats().dropped (raise opts.inbox, or subscribe with a handler)")
      :format(self.url, self.inbox.limit))
  end
end

-- The ack flows of our publishes: PUBACK ends QoS 1; PUBREC moves QoS 2 to PUBREL,
-- PUBCOMP ends it. A 5.0 reason of 0x80 or more fails the publish with it.
local function finish_publish(self, id, ok, err)
  local f = self.inflight[id]
  if not f then return end
  self.inflight[id] = nil
  self.ids[id] = nil
  self.inflight_count = self.inflight_count - 1
  for i, x in ipairs(self.order) do
    if x == f then table.remove(self.order, i) break end
  end
  if f.waiter then settle(f.waiter, ok, err) end
  local w = next(self.window_waiters)
  if w then settle(w, true) end
end

local function ack_reason(self, r)
  if self.version == 5 and r:left() > 0 then
    local code = r:u8("reason code")
    if r:left() > 0 then r:properties() end
    return code
  end
  return 0
end

-- The session is up: on_connect, and after a reconnect on_reconnect with what was
-- done to restore it (once every re-SUBSCRIBE has its SUBACK).
local function announce(self)
  local info = self.announcing
  self.announcing = nil
  if info.reconnects > 0 then
    mw.log.info(("mqtt %s: reconnected, %s; %d in-flight publish%s sent again"):format(self.url,
      info.session_present and "session present (the broker kept the subscriptions)"
        or ("session not present: re-subscribed %d filter%s"):format(info.resubscribed,
          info.resubscribed == 1 and "" or "s"),
      info.resent, info.resent == 1 and "" or "es"))
    handlers(self, "reconnect", info)
  end
  handlers(self, "connect", info)
  if self.connect_waiter then settle(self.connect_waiter, true) end
end

local function on_connack(self, r)
  if self.session then
    return fail(self, "MQTT CONNACK: a second CONNACK on one connection")
  end
  local ack_flags = r:u8("acknowledge flags")
  local code = r:u8("return code")
  local props = self.version == 5 and r:left() > 0 and r:properties() or {}
  r:done()
  if self.connack_timer then self.connack_timer:cancel() self.connack_timer = nil end
  if code ~= 0 then
    local words = self.version == 5 and reason_text(code)
      or ("%s (return code %d)"):format(RETURN_CODES[code] or "unknown return code", code)
    if props.reason_string then words = words .. ": " .. props.reason_string end
    return fail(self, "CONNACK refused: " .. words)
  end
  local present = ack_flags & 1 == 1
  self.session = true
  self.session_present, self.return_code = present, code
  self.connack = props
  if props.assigned_client_identifier then self.client_id = props.assigned_client_identifier end
  if props.receive_maximum then self.window = math.min(self.max_inflight, props.receive_maximum) end
  if props.server_keep_alive and props.server_keep_alive ~= self.keepalive then
    self.keepalive = props.server_keep_alive
    self.conn:heartbeat(self:heartbeat_options())
  end
  local reconnect = self.connects > 0
  self.connects = self.connects + 1
  -- What the broker may have lost comes back: subscriptions when it kept no session
  -- (each in its own SUBSCRIBE: one refused filter fails no other), and every
  -- publish still in flight, in order (a PUBLISH seen before with DUP set, and the
  -- same packet id; a QoS 2 that had its PUBREC as PUBREL).
  local resubscribed = 0
  if reconnect and not present then
    for _, sub in ipairs(self.subs) do
      local id = next_id(self)
      self.ids[id] = true
      self.resubscribing[id] = sub.filter
      send_control(self, self:subscribe_packet(id, sub))
      resubscribed = resubscribed + 1
    end
  end
  local resent = 0
  for _, f in ipairs(self.order) do
    if f.state == "pubrel" then
      send_control(self, packet(T.PUBREL, 2, spack(">I2", f.id)))
    else
      local bytes = f.bytes
      if f.sent then bytes = schar(sbyte(bytes, 1) | 0x08) .. ssub(bytes, 2) end
      send_control(self, bytes)
      f.sent = true
    end
    resent = resent + 1
  end
  self.conn:ready()
  local info = { session_present = present, resubscribed = resubscribed, resent = resent,
                 reconnects = self.connects - 1, properties = props, refused = {} }
  self.announcing = info
  if resubscribed == 0 then announce(self) end
end

local function on_publish(self, r, flags)
  local qos = (flags >> 1) & 3
  if qos == 3 then r:fail("QoS", "is 3 (only 0, 1 and 2 exist)") end
  local topic = r:str("topic name")
  local id = qos > 0 and r:u16("packet identifier") or nil
  local props = self.version == 5 and r:properties() or nil
  local msg = { topic = topic, payload = r:rest(), qos = qos, retain = flags & 1 == 1, dup = flags & 8 == 8,
                id = id, properties = props }
  if qos == 0 then
    deliver(self, msg)
  elseif qos == 1 then
    deliver(self, msg)
    if not self.failed then send_control(self, packet(T.PUBACK, 0, spack(">I2", id))) end
  else
    -- Exactly once: a QoS 2 id already delivered and not yet released is a resend.
    if not self.incoming[id] then
      self.incoming[id] = true
      deliver(self, msg)
    end
    if not self.failed then send_control(self, packet(T.PUBREC, 0, spack(">I2", id))) end
  end
end

local dispatch = {}

dispatch[T.CONNACK] = on_connack
dispatch[T.PUBLISH] = on_publish

dispatch[T.PUBACK] = function(self, r)
  local id = r:u16("packet identifier")
  local code = ack_reason(self, r)
  local f = self.inflight[id]
  if not f or f.qos ~= 1 then return end
  if code >= 0x80 then return finish_publish(self, id, nil, "PUBACK: " .. reason_text(code)) end
  finish_publish(self, id, true)
end

dispatch[T.PUBREC] = function(self, r)
  local id = r:u16("packet identifier")
  local code = ack_reason(self, r)
  local f = self.inflight[id]
  if not f or f.qos ~= 2 then
    if self.version == 5 then
      send_control(self, packet(T.PUBREL, 2, spack(">I2B", id, 0x92)))
    else
      send_control(self, packet(T.PUBREL, 2, spack(">I2", id)))
    end
    return
  end
  if code >= 0x80 then return finish_publish(self, id, nil, "PUBREC: " .. reason_text(code)) end
  f.state = "pubrel"
  send_control(self, packet(T.PUBREL, 2, spack(">I2", id)))
end

dispatch[T.PUBREL] = function(self, r)
  local id = r:u16("packet identifier")
  ack_reason(self, r)
  self.incoming[id] = nil
  send_control(self, packet(T.PUBCOMP, 0, spack(">I2", id)))
end

dispatch[T.PUBCOMP] = function(self, r)
  local id = r:u16("packet identifier")
  local code = ack_reason(self, r)
  local f = self.inflight[id]
  if not f or f.qos ~= 2 then return end
  -- "Packet identifier not found" answers a PUBREL sent again to a broker that lost
  -- the session: it had the message (its PUBREC said so), the flow is over.
  if code >= 0x80 and code ~= 0x92 then return finish_publish(self, id, nil, "PUBCOMP: " .. reason_text(code)) end
  finish_publish(self, id, true)
end

local function suback_words(self, code)
  if self.version == 5 then return reason_text(code) end
  return code == 0x80 and "failure (return code 0x80)" or ("return code 0x%02X"):format(code)
end

dispatch[T.SUBACK] = function(self, r)
  local id = r:u16("packet identifier")
  if self.version == 5 then r:properties() end
  local codes = {}
  while r:left() > 0 do codes[#codes + 1] = r:u8("return code") end
  if #codes == 0 then r:fail("return codes", "are missing (at least one expected)") end
  self.ids[id] = nil
  local filter = self.resubscribing[id]
  if filter then
    self.resubscribing[id] = nil
    local info = self.announcing
    if codes[1] >= 0x80 then
      local err = ("re-SUBSCRIBE to '%s' refused: %s"):format(filter, suback_words(self, codes[1]))
      if info then info.refused[#info.refused + 1] = filter end
      if not handlers(self, "error", err) then mw.log.warn(("mqtt %s: %s"):format(self.url, err)) end
    end
    if info and not next(self.resubscribing) then announce(self) end
    return
  end
  local w = self.pending[id]
  if w then
    self.pending[id] = nil
    settle(w, codes)
  end
end

dispatch[T.UNSUBACK] = function(self, r)
  local id = r:u16("packet identifier")
  local codes = {}
  if self.version == 5 then
    r:properties()
    while r:left() > 0 do codes[#codes + 1] = r:u8("reason code") end
  end
  self.ids[id] = nil
  local w = self.pending[id]
  if w then
    self.pending[id] = nil
    settle(w, codes)
  end
end

dispatch[T.PINGRESP] = function() end

dispatch[T.DISCONNECT] = function(self, r)
  local code = r:left() > 0 and r:u8("reason code") or 0
  local props = r:left() > 0 and r:properties() or {}
  local err = "the broker disconnected: " .. reason_text(code)
  if props.reason_string then err = err .. ": " .. props.reason_string end
  self.last_error = err
  if not handlers(self, "error", err) then mw.log.warn(("mqtt %s: %s"):format(self.url, err)) end
end

local CLIENT_ONLY = { [T.CONNECT] = true, [T.SUBSCRIBE] = true, [T.UNSUBSCRIBE] = true, [T.PINGREQ] = true }

-- Fixed header flags each packet must carry (MQTT-2.2.2-1); PUBLISH has its own.
local REQUIRED_FLAGS = { [T.PUBREL] = 2, [T.SUBSCRIBE] = 2, [T.UNSUBSCRIBE] = 2 }

local function client_packet(self, kind, flags, s, first, last)
  local name = TYPES[kind]
  if CLIENT_ONLY[kind] then
    return fail(self, ("MQTT: the broker sent a %s packet, which only clients send"):format(name))
  end
  if kind == T.AUTH and self.version ~= 5 then
    return fail(self, "MQTT: the broker sent an AUTH packet, which MQTT 3.1.1 does not have")
  end
  if kind ~= T.PUBLISH and flags ~= (REQUIRED_FLAGS[kind] or 0) then
    return fail(self, ("MQTT %s: fixed header flags are 0x%X, must be 0x%X")
      :format(name, flags, REQUIRED_FLAGS[kind] or 0))
  end
  if kind ~= T.CONNACK and not self.session then
    return fail(self, ("MQTT: the broker sent %s before CONNACK"):format(name))
  end
  local handler = dispatch[kind]
  if not handler then
    return fail(self, ("MQTT: the broker sent an %s packet, which this client does not support"):format(name))
  end
  -- One reader per client, reused: no handler keeps it past its packet.
  local r = self.packet_reader
  r.s, r.pos, r.stop, r.name = s, first, last, name
  local ok, err = pcall(handler, self, r, flags)
  r.s = nil
  if not ok then
    if getmetatable(err) == MALFORMED then return fail(self, err.text) end
    error(err, 0)
  end
end

function Client:heartbeat_options()
  if self.keepalive == 0 then return false end
  return { interval = self.keepalive * 3 / 4, timeout = math.max(1, self.keepalive / 2),
           message = packet(T.PINGREQ, 0, ""), kind = "binary" }
end

function Client:subscribe_packet(id, sub)
  local options = sub.qos
  local props = ""
  if self.version == 5 then
    local o = sub.opts
    options = options | (o.no_local and 4 or 0) | (o.retain_as_published and 8 or 0) | ((o.retain_handling or 0) << 4)
    props = encode_properties(o.properties)
  end
  return packet(T.SUBSCRIBE, 2, spack(">I2", id) .. props .. spack(">s2B", sub.filter, options))
end

function M.connect(url, opts)
  if type(url) ~= "string" then bad_argument(1, "mqtt.connect", "string", url) end
  if opts ~= nil and type(opts) ~= "table" then bad_argument(2, "mqtt.connect", "table", opts) end
  opts = opts or {}
  check_options(opts, CONNECT_OPTIONS, "mqtt.connect")
  local target, tcp = transport_url(url)
  if not target then
    misuse("bad argument #1 to 'mqtt.connect' (a ws://, wss://, tcp://, tls://, mqtt:// or mqtts:// URL expected,"
      .. " got '%s')", url)
  end
  local version = opts.version or 4
  if version == 3 then version = 4 end
  if version ~= 4 and version ~= 5 then
    misuse("bad argument #2 to 'mqtt.connect' (opts.version: 4 (3.1.1) or 5 expected, got %s)", tostring(opts.version))
  end
  if opts.will then
    local w = opts.will
    if type(w.topic) ~= "string" then
      misuse("bad argument #2 to 'mqtt.connect' (opts.will.topic: string expected, got %s)", type(w.topic))
    end
    if w.qos ~= nil and w.qos ~= 0 and w.qos ~= 1 and w.qos ~= 2 then
      misuse("bad argument #2 to 'mqtt.connect' (opts.will.qos: 0, 1 or 2 expected)")
    end
  end
  if opts.password and not opts.username and version == 4 then
    misuse("bad argument #2 to 'mqtt.connect' (opts.password: MQTT 3.1.1 needs a username with a password)")
  end
  local clean = opts.clean
  if clean == nil then clean = true end
  local self = setmetatable({
    url = url, opts = opts, version = version, clean = clean, ws = not tcp,
    client_id = opts.client_id or ("moonwire-%08x"):format(math.random(0, 0x7fffffff)),
    keepalive = opts.keepalive or 60, timeout = opts.timeout or 10,
    max_inflight = opts.max_inflight or 20, max_packet = opts.max_packet or 16 * 1024 * 1024,
    session_expiry = opts.session_expiry or (clean and 0 or 0xFFFFFFFF),
    inbox = kit.inbox(opts.inbox or 1000),
    handlers = {}, idle = {}, subs = {}, ids = {}, last_id = 0, pending = {}, resubscribing = {},
    inflight = {}, order = {}, inflight_count = 0, incoming = {}, window_waiters = {}, expecting = {},
    waiting = {}, event_waiters = {}, received = 0, published = 0, connects = 0,
  }, Client)
  self.window = self.max_inflight
  for _, k in ipairs { "keepalive", "max_inflight", "max_packet", "inbox" } do
    local v = opts[k]
    if v ~= nil and (math.type(v) ~= "integer" or v < (k == "keepalive" and 0 or 1)
        or (k == "keepalive" or k == "max_inflight") and v > 65535 or v > MAX_REMAINING) then
      misuse("bad argument #2 to 'mqtt.connect' (opts.%s: a %s integer expected, got %s)", k,
        k == "keepalive" and "non-negative" or "positive", tostring(v))
    end
  end
  self.reader = { parts = {}, have = 0, need = 0, max_packet = self.max_packet }
  local copts = { kind = "binary", ready = "manual", heartbeat = self:heartbeat_options() }
  if tcp then copts.framing = "raw" else copts.protocols = { "mqtt" } end
  for _, k in ipairs(PASSED_ON) do
    if opts[k] ~= nil then copts[k] = opts[k] end
  end
  -- A broker going away is never the end of an MQTT client: an orderly close (a TCP
  -- FIN, a WebSocket 1000 at a broker's shutdown) reconnects too, and for ever unless
  -- the script says otherwise.
  if opts.reconnect ~= false then
    local r = { initial = 1, factor = 2, max = 30, jitter = 0.2, attempts = math.huge, on_normal_close = true }
    for k, v in pairs(opts.reconnect or {}) do r[k] = v end
    copts.reconnect = r
  end
  local c = mw.connect(target, copts)
  self.conn = c
  c:on_open(function()
    local rd = self.reader
    rd.parts, rd.have, rd.need, rd.stopped = {}, 0, 0, false
    self.session = false
    send_control(self, connect_packet(self))
    -- The first CONNACK is awaited by mqtt.connect itself; after a reconnect, a broker
    -- that accepts the connection but never answers gets another dial.
    if self.connects > 0 then
      self.connack_timer = mw.after(self.timeout, function()
        self.connack_timer = nil
        self.last_error = ("timeout: no CONNACK within %g s"):format(self.timeout)
        mw.log.warn(("mqtt %s: %s, reconnecting"):format(self.url, self.last_error))
        self.conn:reconnect()
      end)
    end
  end)
  self.packet_reader = reader("", 1, 0, "")
  local function on_packet(kind, flags, s, first, last)
    client_packet(self, kind, flags, s, first, last)
    if self.failed then self.reader.stopped = true end
  end
  c:on_message(function(_, chunk)
    if self.failed then return end
    local ok, err = feed(self.reader, chunk, on_packet)
    if not ok then fail(self, err) end
  end)
  c:on_error(function(_, err)
    self.last_error = err
    if self.connects > 0 and not handlers(self, "error", err) then mw.log.warn(("mqtt %s: %s"):format(url, err)) end
  end)
  c:on_close(function(_, code, reason, info)
    if self.connack_timer then self.connack_timer:cancel() self.connack_timer = nil end
    local was = self.session
    self.session = false
    -- (Un)subscribes in flight are answered no more: their ids free, their callers told.
    for id, w in pairs(self.pending) do
      self.ids[id] = nil
      self.pending[id] = nil
      settle(w, nil, "closed: the connection was lost before the broker answered"
        .. (info.will_reconnect and " (subscriptions are made again after the reconnect)" or ""))
    end
    for id in pairs(self.resubscribing) do self.ids[id] = nil end
    self.resubscribing = {}
    self.announcing = nil
    -- A session the broker keeps keeps its QoS 2 state too; a clean one starts afresh.
    if self.clean then self.incoming = {} end
    if was then handlers(self, "close", code, reason, info) end
    if not info.will_reconnect then
      self.closed = true
      settle_all(self.waiting, nil, self.failed or (self.disconnecting and "closed") or self.last_error or "closed")
      settle_all(self.expecting, nil, "closed")
      settle_all(self.window_waiters, nil, "closed")
      for _, f in ipairs(self.order) do
        if f.waiter then settle(f.waiter, nil, "closed") end
      end
    end
  end)
  running("mqtt.connect")
  local w = waiter("mqtt.connect", self.waiting)
  self.connect_waiter = w
  local ok, err = wait(w, self.timeout, nil)
  self.connect_waiter = nil
  if not ok then
    err = err or self.failed or self.last_error or ("timeout: no CONNACK within %g s"):format(self.timeout)
    if not self.failed then c:close() end
    return nil, err
  end
  return self
end

local function check_self(self, fname)
  if getmetatable(self) ~= Client then
    misuse("bad self to '%s' (an MQTT client from mqtt.connect expected, got %s)", fname, type(self))
  end
end

local function check_qos(qos, argn, fname)
  if qos ~= 0 and qos ~= 1 and qos ~= 2 then
    misuse("bad argument #%d to '%s' (qos: 0, 1 or 2 expected, got %s)", argn, fname, tostring(qos))
  end
end

local function usable(self)
  if self.failed then return nil, self.failed end
  if self.closed or self.disconnecting then return nil, "closed" end
  return true
end

-- Waits for the SUBACK / UNSUBACK of packet `bytes` with id `id`.
local function request(self, fname, id, bytes, timeout, what)
  running(fname)
  local w = waiter(fname, self.waiting)
  self.pending[id] = w
  self.ids[id] = true
  local sent, err = self.conn:send(bytes)
  if not sent then
    self.pending[id], self.ids[id], self.waiting[w] = nil, nil, nil
    return nil, err
  end
  local result, why = wait(w, timeout, ("timeout: no %s within %g s"):format(what, timeout))
  if not result then
    self.pending[id] = nil
    self.ids[id] = nil
  end
  return result, why
end

-- m:subscribe(filter [, opts | qos] [, fn]) -> granted QoS | nil, err
function Client:subscribe(filter, opts, fn)
  check_self(self, "m:subscribe")
  if type(opts) == "function" then opts, fn = nil, opts end
  if type(opts) == "number" then opts = { qos = opts } end
  opts = opts or {}
  if type(opts) ~= "table" then bad_argument(2, "m:subscribe", "table, number or function", opts) end
  if fn ~= nil and type(fn) ~= "function" then bad_argument(3, "m:subscribe", "function", fn) end
  local levels = check_filter(filter, "m:subscribe")
  local qos = opts.qos or 0
  check_qos(qos, 2, "m:subscribe")
  local ok, err = usable(self)
  if not ok then return nil, err end
  local sub = { filter = filter, qos = qos, opts = opts, handler = fn, match = filter_matcher(filter, levels) }
  local id = next_id(self)
  if not id then return nil, "no packet identifier free (65535 in use)" end
  local codes, why = request(self, "m:subscribe", id, self:subscribe_packet(id, sub), opts.timeout or self.timeout,
    "SUBACK")
  if not codes then return nil, why end
  local code = codes[1]
  if code >= 0x80 then
    return nil, ("SUBSCRIBE to '%s' refused: %s"):format(filter, suback_words(self, code))
  end
  -- One subscription per filter, as the broker keeps it: a new one replaces the old.
  for i, s in ipairs(self.subs) do
    if s.filter == filter then table.remove(self.subs, i) break end
  end
  sub.granted = code
  self.subs[#self.subs + 1] = sub
  return code
end

function Client:unsubscribe(filter)
  check_self(self, "m:unsubscribe")
  check_filter(filter, "m:unsubscribe")
  local ok, err = usable(self)
  if not ok then return nil, err end
  for i, s in ipairs(self.subs) do
    if s.filter == filter then table.remove(self.subs, i) break end
  end
  local id = next_id(self)
  if not id then return nil, "no packet identifier free (65535 in use)" end
  local body = spack(">I2", id) .. (self.version == 5 and "\0" or "") .. spack(">s2", filter)
  local codes, why = request(self, "m:unsubscribe", id, packet(T.UNSUBSCRIBE, 2, body), self.timeout, "UNSUBACK")
  if not codes then return nil, why end
  if codes[1] and codes[1] >= 0x80 then
    return nil, ("UNSUBSCRIBE from '%s' refused: %s"):format(filter, reason_text(codes[1]))
  end
  return true
end

-- m:publish(topic, payload [, { qos =, retain =, wait =, timeout =, properties = }])
-- QoS 0: true once sent (or queued while the session is down). QoS 1 and 2: waits for
-- the PUBACK / PUBCOMP and returns true, or nil, err; with wait = false it returns the
-- packet id once the message has a slot in the in-flight window.
function Client:publish(topic, payload, opts)
  check_self(self, "m:publish")
  if type(topic) ~= "string" or topic == "" or topic:find("[+#]") then
    bad_argument(1, "m:publish", "topic name (a non-empty string without + or #)", topic)
  end
  if payload == nil then payload = "" end
  if type(payload) ~= "string" then bad_argument(2, "m:publish", "string", payload) end
  if opts ~= nil and type(opts) ~= "table" then bad_argument(3, "m:publish", "table", opts) end
  opts = opts or {}
  local qos = opts.qos or 0
  check_qos(qos, 3, "m:publish")
  local ok, err = usable(self)
  if not ok then return nil, err end
  local flags = qos << 1 | (opts.retain and 1 or 0)
  local props = self.version == 5 and encode_properties(opts.properties) or ""
  if qos == 0 then
    local sent, why = self.conn:send(packet(T.PUBLISH, flags, spack(">s2", topic) .. props .. payload))
    if sent then self.published = self.published + 1 end
    return sent, why
  end
  self.published = self.published + 1
  running("m:publish")
  while self.inflight_count >= self.window do
    local slot, why = wait(waiter("m:publish", self.window_waiters))
    if not slot then return nil, why end
  end
  local id = next_id(self)
  if not id then return nil, "no packet identifier free (65535 in use)" end
  local f = { id = id, qos = qos, state = "publish",
              bytes = packet(T.PUBLISH, flags, spack(">s2I2", topic, id) .. props .. payload) }
  self.ids[id] = true
  self.inflight[id] = f
  self.inflight_count = self.inflight_count + 1
  self.order[#self.order + 1] = f
  if self.session then
    send_control(self, f.bytes)
    f.sent = true
  end
  if opts.wait == false then return id end
  local timeout = opts.timeout or self.timeout
  local w = waiter("m:publish", self.waiting)
  f.waiter = w
  local result, why = wait(w, timeout, ("timeout: no %s for packet %d within %g s (still in flight: sent again"
    .. " after a reconnect)"):format(qos == 1 and "PUBACK" or "PUBCOMP", id, timeout))
  f.waiter = nil
  return result, why
end

-- Waits until no publish is in flight (every wait = false publish acknowledged).
function Client:flush(timeout)
  check_self(self, "m:flush")
  running("m:flush")
  local deadline = timeout and mw.now() + timeout
  while self.inflight_count > 0 do
    local ok, err = usable(self)
    if not ok then return nil, err end
    local w = waiter("m:flush", self.window_waiters)
    local left = deadline and math.max(0, deadline - mw.now())
    local slot, why = wait(w, left, ("timeout: %d publishes still in flight"):format(self.inflight_count))
    if not slot then return nil, why end
    -- A freed slot wakes one waiter: pass it on to a publish waiting for one.
    local other = next(self.window_waiters)
    if other and self.inflight_count < self.window then settle(other, true) end
  end
  return true
end

-- The match of expect / messages: a topic filter (string) or a function(msg) -> truthy.
local function message_matcher(match, fname)
  if match == nil then return function() return true end end
  if type(match) == "function" then return match end
  local f = filter_matcher(match, check_filter(match, fname))
  return function(msg) return f(msg.topic) end
end

-- m:expect([filter | fn] [, timeout]) -> msg | nil, err: the first message (kept in the
-- inbox, or the next to arrive) that no subscription handler took and that matches.
function Client:expect(match, timeout)
  check_self(self, "m:expect")
  if type(match) == "number" and timeout == nil then match, timeout = nil, match end
  if match ~= nil and type(match) ~= "string" and type(match) ~= "function" then
    bad_argument(1, "m:expect", "topic filter or function", match)
  end
  if timeout ~= nil and (type(timeout) ~= "number" or timeout < 0) then
    bad_argument(2, "m:expect", "number", timeout)
  end
  local m = message_matcher(match, "m:expect")
  local msg = self.inbox:take(m)
  if msg then return msg end
  local ok, err = usable(self)
  if not ok then return nil, err end
  running("m:expect")
  return wait(waiter("m:expect", self.expecting, m), timeout or self.timeout, ("timeout: no message%s within %g s"):format(
    type(match) == "string" and (" on '" .. match .. "'") or "", timeout or self.timeout))
end

function Client:receive(timeout)
  return self:expect(nil, timeout)
end

-- for msg in m:messages([filter] [, timeout]) do ... end: ends after `timeout` seconds
-- without a message (default: the client's timeout), or when the client closes.
function Client:messages(match, timeout)
  check_self(self, "m:messages")
  if type(match) == "number" and timeout == nil then match, timeout = nil, match end
  message_matcher(match, "m:messages")
  return function()
    local msg = self:expect(match, timeout)
    return msg
  end
end

for _, event in ipairs { "message", "connect", "reconnect", "close", "error" } do
  Client["on_" .. event] = function(self, fn)
    check_self(self, "m:on_" .. event)
    if type(fn) ~= "function" then bad_argument(1, "m:on_" .. event, "function", fn) end
    local list = self.handlers[event] or {}
    list[#list + 1] = fn
    self.handlers[event] = list
    return self
  end
end

-- m:wait(event [, timeout]) -> what the event's handlers get (info, or the error), or
-- nil, "timeout": waits for the next "connect", "reconnect", "close" or "error".
local EVENTS = { connect = true, reconnect = true, close = true, error = true }
function Client:wait(event, timeout)
  check_self(self, "m:wait")
  if not EVENTS[event] then bad_argument(1, "m:wait", '"connect", "reconnect", "close" or "error"', event) end
  if timeout ~= nil and (type(timeout) ~= "number" or timeout < 0) then bad_argument(2, "m:wait", "number", timeout) end
  if self.closed then return nil, self.failed or "closed" end
  running("m:wait")
  local list = self.event_waiters[event] or {}
  self.event_waiters[event] = list
  return wait(waiter("m:wait", list), timeout or self.timeout, ("timeout: no %s within %g s"):format(event, timeout or self.timeout))
end

-- m:disconnect([reason_code]): DISCONNECT (no will), then the connection closes.
function Client:disconnect(code)
  check_self(self, "m:disconnect")
  if self.closed then return false end
  self.disconnecting = true
  if self.session then
    local body = ""
    if self.version == 5 and code then body = schar(code) end
    send_control(self, packet(T.DISCONNECT, 0, body))
  end
  self.conn:close()
  return true
end
Client.close = Client.disconnect

function Client:stats()
  check_self(self, "m:stats")
  return { inflight = self.inflight_count, inbox = self.inbox:count(), dropped = self.inbox.dropped,
           published = self.published, received = self.received, reconnects = math.max(0, self.connects - 1),
           subscriptions = #self.subs, connection = self.conn:stats() }
end

function Client:connected() return self.session == true end
-- The mw.connect connection underneath (its stats, state, close).
function Client:connection() return self.conn end
function Client:drain(timeout) return self.conn:drain(timeout) end

---------------------------------------------------------------------------------------
-- The broker stub: enough of a broker for mock servers and tests (CONNECT with
-- optional users, SUBSCRIBE / UNSUBSCRIBE with wildcards, PUBLISH at QoS 0 and 1
-- routed to every matching subscription (QoS 2 is accepted and delivered at QoS 1),
-- retained messages, PINGREQ, wills). No sessions kept across connections, no
-- redelivery: a mock, not a broker to run.

local Broker = {}
Broker.__index = Broker

local BROKER_OPTIONS = { users = "table", retained = "number", subscriptions = "number", max_packet = "number",
  tls = "table", heartbeat = "table|boolean", queue = "table" }

-- Every MQTT packet is a binary message (a WebSocket text frame would be refused).
local function send(peer, bytes) return peer:send(bytes, "binary") end

local function broker_log(b, peer, text)
  mw.log.warn(("mqtt broker %s: client %s: %s"):format(b.server:url(), tostring(peer.id), text))
end

local function route(b, topic, payload, qos, retain, from)
  if retain then
    if payload == "" then
      if b.retained[topic] then b.retained[topic], b.retained_count = nil, b.retained_count - 1 end
    else
      if not b.retained[topic] then
        if b.retained_count >= b.retained_limit then
          mw.log.warn(("mqtt broker %s: %d retained messages kept already (opts.retained): not keeping '%s'")
            :format(b.server:url(), b.retained_limit, topic))
        else
          b.retained_count = b.retained_count + 1
          b.retained[topic] = { payload = payload, qos = qos }
        end
      else
        b.retained[topic] = { payload = payload, qos = qos }
      end
    end
  end
  for _, handler in ipairs(b.handlers.publish) do
    handler({ topic = topic, payload = payload, qos = qos, retain = retain, client_id = from and from.client_id })
  end
  for _, s in pairs(b.sessions) do
    if s.connected then
      local best
      for _, sub in pairs(s.subs) do
        if sub.match(topic) and (not best or sub.qos > best) then best = sub.qos end
      end
      if best then s.send_publish(topic, payload, math.min(qos, best), false) end
    end
  end
end

local function broker_packet(b, peer, s, kind, flags, r)
  if not s.connected and kind ~= T.CONNECT then
    r:fail("packet", "came before CONNECT")
  end
  if kind == T.CONNECT then
    if s.connected then r:fail("packet", "is a second CONNECT on one connection") end
    local name = r:str("protocol name")
    local level = r:u8("protocol level")
    if name ~= "MQTT" or (level ~= 4 and level ~= 5) then
      s.version = 4
      send(peer, packet(T.CONNACK, 0, "\0\1"))
      peer:close()
      return
    end
    s.version = level
    local cflags = r:u8("connect flags")
    r:u16("keep alive")
    if level == 5 then r:properties() end
    s.client_id = r:str("client identifier")
    if cflags & 0x04 ~= 0 then
      if level == 5 then r:properties() end
      s.will = { topic = r:str("will topic"), payload = r:bin("will payload"), qos = (cflags >> 3) & 3,
                 retain = cflags & 0x20 ~= 0 }
    end
    local user = cflags & 0x80 ~= 0 and r:str("user name") or nil
    local password = cflags & 0x40 ~= 0 and r:bin("password") or nil
    local v5 = level == 5
    if b.users and (not user or b.users[user] ~= password) then
      send(peer, packet(T.CONNACK, 0, v5 and "\0\x86\0" or "\0\4"))
      s.will = nil
      peer:close()
      return
    end
    s.connected = true
    send(peer, packet(T.CONNACK, 0, v5 and "\0\0\0" or "\0\0"))
    for _, handler in ipairs(b.handlers.connect) do handler(s.client_id, { version = level, username = user }) end
  elseif kind == T.PUBLISH then
    local qos = (flags >> 1) & 3
    if qos == 3 then r:fail("QoS", "is 3 (only 0, 1 and 2 exist)") end
    local topic = r:str("topic name")
    local id = qos > 0 and r:u16("packet identifier") or nil
    if s.version == 5 then r:properties() end
    local payload = r:rest()
    if qos == 1 then send(peer, packet(T.PUBACK, 0, spack(">I2", id))) end
    if qos == 2 then send(peer, packet(T.PUBREC, 0, spack(">I2", id))) end
    route(b, topic, payload, math.min(qos, 1), flags & 1 == 1, s)
  elseif kind == T.PUBREL then
    send(peer, packet(T.PUBCOMP, 0, spack(">I2", r:u16("packet identifier"))))
  elseif kind == T.SUBSCRIBE then
    local id = r:u16("packet identifier")
    if s.version == 5 then r:properties() end
    local codes, added = {}, {}
    repeat
      local filter = r:str("topic filter")
      local options = r:u8("subscription options")
      local ok, levels = pcall(check_filter, filter, "SUBSCRIBE")
      if ok and not s.subs[filter] and s.sub_count >= b.sub_limit then
        codes[#codes + 1] = schar(s.version == 5 and 0x97 or 0x80)   -- quota exceeded
      elseif ok then
        if not s.subs[filter] then s.sub_count = s.sub_count + 1 end
        local qos = math.min(options & 3, 1)
        s.subs[filter] = { qos = qos, match = filter_matcher(filter, levels) }
        codes[#codes + 1] = schar(qos)
        added[#added + 1] = filter
        for _, handler in ipairs(b.handlers.subscribe) do handler(s.client_id, filter, qos) end
      else
        codes[#codes + 1] = schar(s.version == 5 and 0x8F or 0x80)
      end
    until r:left() == 0
    send(peer, packet(T.SUBACK, 0, spack(">I2", id) .. (s.version == 5 and "\0" or "") .. concat(codes)))
    for _, filter in ipairs(added) do
      local sub = s.subs[filter]
      for topic, m in pairs(b.retained) do
        if sub.match(topic) then s.send_publish(topic, m.payload, math.min(m.qos, sub.qos), true) end
      end
    end
  elseif kind == T.UNSUBSCRIBE then
    local id = r:u16("packet identifier")
    if s.version == 5 then r:properties() end
    local codes = {}
    repeat
      local filter = r:str("topic filter")
      codes[#codes + 1] = schar(s.subs[filter] and 0 or 0x11)
      if s.subs[filter] then s.sub_count = s.sub_count - 1 end
      s.subs[filter] = nil
    until r:left() == 0
    send(peer, packet(T.UNSUBACK, 0, spack(">I2", id) .. (s.version == 5 and "\0" .. concat(codes) or "")))
  elseif kind == T.PINGREQ then
    send(peer, packet(T.PINGRESP, 0, ""))
  elseif kind == T.DISCONNECT then
    s.will = nil
    peer:close()
  elseif kind == T.PUBACK or kind == T.PUBREC or kind == T.PUBCOMP then
    -- Acks of what the stub delivered: it keeps nothing to retry.
    if kind == T.PUBREC then send(peer, packet(T.PUBREL, 2, spack(">I2", r:u16("packet identifier")))) end
  else
    r:fail("packet", "is one only a broker sends")
  end
end

-- mqtt.broker(url [, opts]) -> broker | nil, err. url: "tcp://127.0.0.1:0" or
-- "ws://127.0.0.1:0/" (subprotocol mqtt). opts: users = { name = password }
-- (refuses others with "bad user name or password"), retained (how many retained
-- messages it keeps, default 1000), subscriptions (per client, default 1000; more are
-- refused in the SUBACK), max_packet (default 1 MiB).
function M.broker(url, opts)
  if type(url) ~= "string" then bad_argument(1, "mqtt.broker", "string", url) end
  if opts ~= nil and type(opts) ~= "table" then bad_argument(2, "mqtt.broker", "table", opts) end
  opts = opts or {}
  check_options(opts, BROKER_OPTIONS, "mqtt.broker")
  local target, tcp = transport_url(url)
  if not target then
    misuse("bad argument #1 to 'mqtt.broker' (a ws://, tcp:// or mqtt:// URL expected, got '%s')", url)
  end
  local lopts = { tls = opts.tls, queue = opts.queue, heartbeat = opts.heartbeat }
  if tcp then lopts.framing = "raw" else lopts.protocols = { "mqtt" } end
  local server, err = mw.listen(target, lopts)
  if not server then return nil, err end
  local b = setmetatable({ server = server, users = opts.users, retained = {}, retained_count = 0,
    retained_limit = opts.retained or 1000, sub_limit = opts.subscriptions or 1000, sessions = {},
    handlers = { publish = {}, subscribe = {}, connect = {} },
    max_packet = opts.max_packet or 1024 * 1024 }, Broker)
  server:on_connect(function(peer)
    local s = { reader = { parts = {}, have = 0, need = 0, max_packet = b.max_packet }, subs = {}, sub_count = 0,
                next_id = 0, version = 4 }
    function s.send_publish(topic, payload, qos, retain)
      local flags = qos << 1 | (retain and 1 or 0)
      local id = ""
      if qos > 0 then
        s.next_id = s.next_id % 65535 + 1
        id = spack(">I2", s.next_id)
      end
      send(peer, packet(T.PUBLISH, flags, spack(">s2", topic) .. id .. (s.version == 5 and "\0" or "") .. payload))
    end
    b.sessions[peer] = s
  end)
  server:on_message(function(peer, chunk)
    local s = b.sessions[peer]
    if not s or s.reader.stopped then return end
    local ok, ferr = feed(s.reader, chunk, function(kind, flags, buf, first, last)
      local pok, perr = pcall(broker_packet, b, peer, s, kind, flags, reader(buf, first, last, TYPES[kind]))
      if not pok then
        if getmetatable(perr) ~= MALFORMED then error(perr, 0) end
        broker_log(b, peer, perr.text)
        s.reader.stopped = true
        peer:close(1002)
      end
    end)
    if not ok then
      broker_log(b, peer, ferr)
      s.reader.stopped = true
      peer:close(1002)
    end
  end)
  server:on_close(function(peer)
    local s = b.sessions[peer]
    b.sessions[peer] = nil
    if s and s.connected and s.will then
      route(b, s.will.topic, s.will.payload, math.min(s.will.qos, 1), s.will.retain, s)
    end
  end)
  return b
end

function Broker:url() return self.server:url() end
function Broker:close() return self.server:close() end
function Broker:clients()
  local list = {}
  for _, s in pairs(self.sessions) do
    if s.connected then list[#list + 1] = s.client_id end
  end
  table.sort(list)
  return list
end
-- b:publish(topic, payload [, { qos =, retain = }]): as if a client had published it.
function Broker:publish(topic, payload, opts)
  opts = opts or {}
  route(self, topic, payload or "", math.min(opts.qos or 0, 1), opts.retain or false, nil)
end
-- b:on_connect(fn(client_id, info)), b:on_subscribe(fn(client_id, filter, qos)),
-- b:on_publish(fn(msg)) where msg = { topic, payload, qos, retain, client_id }.
kit.define_handlers(Broker, "b", { "connect", "subscribe", "publish" }, function(b) return b.handlers end, "%s")

M.reason_text = reason_text

return M
