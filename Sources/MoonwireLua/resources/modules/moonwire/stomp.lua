-- moonwire.stomp: a STOMP 1.2 client over WebSocket (subprotocol v12.stomp) and
-- over TCP (tcp://, tls://), on mw.connect.
--
-- Design rules:
--  * The byte stream is cut into frames here, by one parser for both transports:
--    a WebSocket message may hold several frames or part of one, and TCP has no
--    messages at all (framing = "raw"). What waits for the rest of a frame is
--    bounded by `max_frame`; a frame larger than that closes the connection.
--  * CONNECT goes past the send queue (ready = "manual"); what the script sends
--    before CONNECTED (or while reconnecting) waits in the connection's queue and
--    goes out after it, in order. After a reconnect every subscription is made
--    again before that queue is released, and on_connected says so.
--  * Heart-beats are negotiated from CONNECT/CONNECTED and run by the
--    connection's own heartbeat (an EOL as its message): the script never sees
--    them, and a broker silent for longer than agreed is dropped (and reconnected).
--  * An ERROR frame comes to the script in words: on_error, and as the nil, err
--    of whatever waited (a receipt, wait_connected). The broker closes after it.
--  * Misuse raises at the caller's line; failures from outside are nil, err.

local mw = require "moonwire"

local stomp = {}

local DEFAULTS = { heart_beat = { 10000, 10000 }, receipt_timeout = 10, max_frame = 4 * 1024 * 1024, max_queued = 4096 }
local MAX_HEADERS = 64 * 1024
local SERVER_COMMANDS = { CONNECTED = true, MESSAGE = true, RECEIPT = true, ERROR = true }
local CLIENT_COMMANDS = { CONNECT = true, STOMP = true, SEND = true, SUBSCRIBE = true, UNSUBSCRIBE = true, ACK = true,
                          NACK = true, BEGIN = true, COMMIT = true, ABORT = true, DISCONNECT = true }
local ACK_MODES = { auto = true, client = true, ["client-individual"] = true }

-- ---------------------------------------------------------------------------
-- The prelude's helpers (misuse at the user's line, the check that the caller
-- may wait, waiters in a list woken by what they wait for), given by require.
local kit = select(3, ...)
local misuse, running, wait_listed, wake = kit.misuse, kit.running, kit.wait_listed, kit.wake_listed

-- The running coroutine waits (mw.future) in `list` until `wake` picks it, or
-- until `timeout` seconds passed (then nil, "timeout after N s: <what>").
local function wait_in(list, fname, timeout, what)
  return wait_listed(list, { future = mw.future(fname) }, timeout,
    timeout and ("timeout after %g s: %s"):format(timeout, what))
end

-- ---------------------------------------------------------------------------
-- Frames: { command =, headers = { name = value }, body = "" }

-- Header escaping (STOMP 1.2): every frame but CONNECT and CONNECTED.
local ESCAPE = { ["\\"] = "\\\\", ["\r"] = "\\r", ["\n"] = "\\n", [":"] = "\\c" }
local UNESCAPE = { ["\\\\"] = "\\", ["\\r"] = "\r", ["\\n"] = "\n", ["\\c"] = ":" }

local function escape(s) return (s:gsub("[\\\r\n:]", ESCAPE)) end

local function unescape(s, what)
  if not s:find("\\", 1, true) then return s end
  local bad
  local out = s:gsub("\\.?", function(seq)
    local c = UNESCAPE[seq]
    if not c then bad = bad or seq end
    return c
  end)
  if bad then return nil, ("%s: undefined escape sequence '%s' (STOMP 1.2 has \\r \\n \\c \\\\)"):format(what, bad) end
  return out
end

-- The bytes of a frame. `headers` is a list of { name, value } pairs, in order.
local function encode(command, headers, body)
  local raw = command == "CONNECT" or command == "STOMP"
  local out = { command, "\n" }
  for _, h in ipairs(headers) do
    local name, value = tostring(h[1]), tostring(h[2])
    if raw then
      if name:find("[\r\n:]") or value:find("[\r\n]") then
        misuse(("%s header %q: a CONNECT header cannot hold CR, LF (or ':' in its name)"):format(command, name))
      end
    else
      name, value = escape(name), escape(value)
    end
    out[#out + 1] = name .. ":" .. value .. "\n"
  end
  out[#out + 1] = "\n"
  out[#out + 1] = body or ""
  out[#out + 1] = "\0"
  return table.concat(out)
end

-- One frame from `buf` at `pos`: frame, next position; nil, pos, need when more
-- bytes are needed (need: the length of buf that completes the frame, or "nul"
-- or "eol": the byte that may complete it); false, err when the bytes cannot be STOMP.
local function parse(buf, pos)
  -- EOLs between frames are heart-beats.
  local start = buf:find("[^\r\n]", pos)
  if not start then return nil, #buf + 1 end
  local head_end, body_start = buf:find("\n\r?\n", start)
  if not head_end then
    if #buf - start > MAX_HEADERS then return false, "a frame's command and headers are longer than 64 KiB" end
    return nil, start, "eol"
  end
  if head_end - start > MAX_HEADERS then return false, "a frame's command and headers are longer than 64 KiB" end
  local block = buf:sub(start, head_end)
  local command, rest = block:match("^([^\r\n]*)\r?\n(.*)$")
  if not SERVER_COMMANDS[command] then
    return false, ("unknown command %q (a server sends CONNECTED, MESSAGE, RECEIPT or ERROR)"):format(command:sub(1, 40))
  end
  local raw = command == "CONNECTED"
  local headers = {}
  for line in rest:gmatch("([^\n]*)\n") do
    line = line:gsub("\r$", "")
    local name, value = line:match("^([^:]*):(.*)$")
    if not name then return false, ("%s: header line %q has no ':'"):format(command, line:sub(1, 60)) end
    if not raw then
      local err
      name, err = unescape(name, command .. " header name")
      if not name then return false, err end
      value, err = unescape(value, command .. " header " .. name)
      if not value then return false, err end
    end
    -- A repeated header: the first one counts.
    if headers[name] == nil then headers[name] = value end
  end
  body_start = body_start + 1
  local length = headers["content-length"]
  local body, next_pos
  if length then
    if not length:match("^%d+$") then
      return false, ("%s: header content-length must be a number of bytes, got %q"):format(command, length:sub(1, 40))
    end
    local n = tonumber(length)
    if #buf < body_start + n then return nil, start, body_start + n end
    if buf:byte(body_start + n) ~= 0 then
      return false, ("%s: no NUL after the %d bytes of body that content-length announced"):format(command, n)
    end
    body, next_pos = buf:sub(body_start, body_start + n - 1), body_start + n + 1
  else
    local nul = buf:find("\0", body_start, true)
    if not nul then return nil, start, "nul" end
    body, next_pos = buf:sub(body_start, nul - 1), nul + 1
  end
  return { command = command, headers = headers, body = body }, next_pos
end

stomp.encode, stomp.parse = encode, parse

-- The headers of a frame as a list of pairs: the module's first, then the
-- script's (which cannot replace them), in name order for a stable wire format.
local function header_list(fixed, extra, fname)
  local list, seen = {}, {}
  for _, h in ipairs(fixed) do
    if h[2] ~= nil then
      list[#list + 1] = h
      seen[h[1]] = true
    end
  end
  if extra ~= nil then
    if type(extra) ~= "table" then misuse(("bad argument to '%s' (headers: table expected, got %s)"):format(fname, type(extra))) end
    local names = {}
    for k, v in pairs(extra) do
      if type(k) ~= "string" then misuse(("bad argument to '%s' (headers: names must be strings)"):format(fname)) end
      if type(v) ~= "string" and type(v) ~= "number" and type(v) ~= "boolean" then
        misuse(("bad argument to '%s' (headers.%s: string or number expected, got %s)"):format(fname, k, type(v)))
      end
      if not seen[k] and k ~= "receipt" then names[#names + 1] = k end
    end
    table.sort(names)
    for _, k in ipairs(names) do list[#list + 1] = { k, extra[k] } end
  end
  return list
end

-- "ERROR: message: first line of the body", for the script.
local function error_words(frame)
  local words = "stomp: ERROR from the broker"
  local message = frame.headers.message
  if message and message ~= "" then words = words .. ": " .. message end
  local detail = frame.body:match("^%s*([^\r\n]+)")
  if detail and detail ~= message then
    words = words .. " (" .. (#detail > 200 and detail:sub(1, 200) .. "..." or detail) .. ")"
  end
  return words
end

-- ---------------------------------------------------------------------------
-- The client

local Client = {}
Client.__index = Client
local Subscription = {}
Subscription.__index = Subscription
local Message = {}
Message.__index = Message

local OWN = { login = true, passcode = true, host = true, heart_beat = true, connect_headers = true,
              receipt_timeout = true, max_frame = true, max_queued = true }

local function check_options(url, opts)
  if type(url) ~= "string" then misuse(("bad argument #1 to 'stomp.connect' (string expected, got %s)"):format(type(url))) end
  if opts ~= nil and type(opts) ~= "table" then misuse(("bad argument #2 to 'stomp.connect' (table expected, got %s)"):format(type(opts))) end
  local mine, rest = {}, {}
  for k, v in pairs(opts or {}) do
    if OWN[k] then mine[k] = v
    elseif k == "protocols" or k == "framing" or k == "codec" or k == "ready" or k == "heartbeat" then
      misuse(("bad argument #2 to 'stomp.connect' (opts.%s: set by the module%s)"):format(k,
        k == "heartbeat" and "; STOMP heart-beats are opts.heart_beat = { send_ms, receive_ms }" or ""))
    else rest[k] = v end
  end
  for k, v in pairs(DEFAULTS) do if mine[k] == nil then mine[k] = v end end
  local hb = mine.heart_beat
  if type(hb) ~= "table" or math.type(hb[1]) ~= "integer" or math.type(hb[2]) ~= "integer" or hb[1] < 0 or hb[2] < 0 then
    misuse("bad argument #2 to 'stomp.connect' (opts.heart_beat: { send_ms, receive_ms } expected, integers >= 0)")
  end
  for _, k in ipairs { "receipt_timeout", "max_frame", "max_queued" } do
    if type(mine[k]) ~= "number" or mine[k] <= 0 then
      misuse(("bad argument #2 to 'stomp.connect' (opts.%s: a positive number expected)"):format(k))
    end
  end
  if mine.connect_headers ~= nil and type(mine.connect_headers) ~= "table" then
    misuse("bad argument #2 to 'stomp.connect' (opts.connect_headers: table expected)")
  end
  return mine, rest
end

function stomp.connect(url, opts)
  local mine, rest = check_options(url, opts)
  local scheme = url:match("^(%a+)://")
  if scheme == "ws" or scheme == "wss" then
    rest.protocols = { "v12.stomp" }
  elseif scheme == "tcp" or scheme == "tls" then
    rest.framing = "raw"
  else
    misuse(("bad argument #1 to 'stomp.connect' (a ws://, wss://, tcp:// or tls:// URL expected, got %q)"):format(url))
  end
  -- The CONNECT frame, made (and its headers checked) once, at the caller's line.
  local connect_frame = encode("CONNECT", header_list({
    { "accept-version", "1.2" }, { "host", mine.host or "/" }, { "login", mine.login }, { "passcode", mine.passcode },
    { "heart-beat", mine.heart_beat[1] .. "," .. mine.heart_beat[2] },
  }, mine.connect_headers, "stomp.connect"))
  rest.ready = "manual"
  rest.heartbeat = false
  local c = mw.connect(url, rest)
  local self = setmetatable({
    connection = c, options = mine, url = url, connect_frame = connect_frame,
    subs = {}, sub_count = 0, receipts = {}, receipt_count = 0, generation = 0,
    connected = false, refused = nil,
    on_connected_handlers = {}, on_error_handlers = {}, on_close_handlers = {},
    connect_waiters = {},
  }, Client)
  c:on_open(function() self:opened() end)
  c:on_message(function(_, data) self:received(data) end)
  c:on_error(function(_, err) self.last_error = err end)
  c:on_close(function(_, code, reason, info) self:closed(code, reason, info) end)
  return self
end

function Client:emit_error(err, frame)
  if self.on_error_handlers[1] then
    for _, handler in ipairs(self.on_error_handlers) do handler(self, err, frame) end
  else
    mw.log.warn("stomp " .. self.url .. ": " .. err)
  end
end

-- A broker that cannot be talked to: the connection is closed, in words.
function Client:violation(err)
  err = "stomp: " .. err
  self.protocol_error = err
  self:emit_error(err)
  self.connection:close(1002, #err > 123 and err:sub(1, 120) .. "..." or err)
end

function Client:opened()
  self.parts, self.need = nil, nil
  self.connected = false
  self.connection:send_now(self.connect_frame)
end

-- Bytes from the broker. While a frame is incomplete its pieces are kept in a
-- list and joined only once the missing part may have come (the length that
-- content-length announced, a NUL, an EOL): a large frame in small pieces costs
-- its length, not its length squared.
function Client:received(data)
  local parts, need = self.parts, self.need
  if need then
    parts[#parts + 1] = data
    self.held = self.held + #data
    if self.held > self.options.max_frame then
      return self:violation(("a frame larger than max_frame (%d bytes) is coming; closed"):format(self.options.max_frame))
    end
    if (need == "nul" and not data:find("\0", 1, true)) or (need == "eol" and not data:find("\n", 1, true))
        or (type(need) == "number" and self.held < need) then
      return
    end
    data = table.concat(parts)
  end
  self.parts, self.need = nil, nil
  local pos = 1
  while true do
    local frame, next_pos, wants = parse(data, pos)
    if frame == false then return self:violation(next_pos) end
    pos = next_pos
    if not frame then
      if pos <= #data then
        local rest = data:sub(pos)
        if #rest > self.options.max_frame then
          return self:violation(("a frame larger than max_frame (%d bytes) is coming; closed"):format(self.options.max_frame))
        end
        self.parts, self.held = { rest }, #rest
        self.need = type(wants) == "number" and wants - pos + 1 or wants
      end
      return
    end
    self:dispatch(frame)
    if self.protocol_error then return end
  end
end

function Client:dispatch(frame)
  local command = frame.command
  if command == "CONNECTED" then
    return self:connected_frame(frame)
  elseif command == "ERROR" then
    local words = error_words(frame)
    if not self.connected then
      -- CONNECT refused (bad login, unknown virtual host): retrying would not help.
      self.refused = words
      self.connection:reconnect(false)
      self:emit_error(words, frame)
      self.connection:close()
      self.ended = words
      return wake(self.connect_waiters, nil, nil, words)
    end
    self:emit_error(words, frame)
    -- The ERROR answers the frame whose receipt it names; one that names none
    -- (RabbitMQ's for an unknown destination) answers every frame waiting for its
    -- RECEIPT, which would otherwise wait in vain: STOMP has the broker close after it.
    local rid = frame.headers["receipt-id"]
    local failed = {}
    for id, waiter in pairs(self.receipts) do
      if rid == nil or id == rid then failed[#failed + 1] = waiter self.receipts[id] = nil end
    end
    for _, waiter in ipairs(failed) do waiter:set(nil, words, frame) end
    return
  elseif not self.connected then
    return self:violation(("%s before CONNECTED"):format(command))
  elseif command == "MESSAGE" then
    local id = frame.headers.subscription
    local sub = id and self.subs[id]
    if not sub then
      return self:emit_error(("stomp: MESSAGE for subscription %q, which this client does not hold (dropped)"):format(tostring(id)), frame)
    end
    return sub:deliver(frame)
  elseif command == "RECEIPT" then
    local rid = frame.headers["receipt-id"]
    local waiter = rid and self.receipts[rid]
    if waiter then
      self.receipts[rid] = nil
      waiter:set(true)
    end
  end
end

-- The heart-beats both sides agreed on, in seconds: how often we send, how long
-- the broker may stay silent.
local function negotiate(ours, theirs)
  local cx, cy = ours[1], ours[2]
  local sx, sy = (theirs or "0,0"):match("^(%d+),(%d+)$")
  sx, sy = tonumber(sx) or 0, tonumber(sy) or 0
  local send = (cx > 0 and sy > 0) and math.max(cx, sy) or 0
  local expect = (cy > 0 and sx > 0) and math.max(cy, sx) or 0
  return send / 1000, expect / 1000
end

function Client:connected_frame(frame)
  if self.connected then return self:violation("a second CONNECTED") end
  local version = frame.headers.version
  if version ~= "1.2" then
    return self:violation(("CONNECTED: header version must be 1.2 (the version asked for), got %q"):format(tostring(version)))
  end
  self.connected = true
  self.generation = self.generation + 1
  local send, expect = negotiate(self.options.heart_beat, frame.headers["heart-beat"])
  self.heart_beat = { send = send, expect = expect }
  if expect > 0 then
    -- The connection's heartbeat: an EOL goes out after `send` s of outbound
    -- silence (or `expect` s of inbound silence), and a broker that sends nothing
    -- for `expect` s more is dropped. Its beats answer the probes, so they go on.
    self.connection:heartbeat({ interval = send > 0 and math.min(send, expect) or expect,
                                timeout = expect, message = "\n", kind = "text" })
  elseif send > 0 then
    -- Beats only from us: the heartbeat above would wait for an answer that
    -- never comes, so a timer sends them.
    self.beat_timer = mw.every(send, function() self.connection:send_now("\n") end)
  end
  local info = { reconnects = self.connection:stats().reconnects, headers = frame.headers, resubscribed = {} }
  -- Subscriptions are made (again, after a reconnect) before what waited in the queue goes out.
  local ids = {}
  for id in pairs(self.subs) do ids[#ids + 1] = id end
  table.sort(ids)
  for _, id in ipairs(ids) do
    local sub = self.subs[id]
    self.connection:send_now(sub:frame())
    if sub.made then info.resubscribed[#info.resubscribed + 1] = id end
    sub.made = true
  end
  self.connection:ready()
  self.connected_headers = frame.headers
  for _, handler in ipairs(self.on_connected_handlers) do mw.spawn(handler, self, info) end
  wake(self.connect_waiters, nil, frame.headers)
end

function Client:closed(code, reason, info)
  self.connected = false
  self.parts, self.need = nil, nil
  if self.heart_beat then
    if self.beat_timer then self.beat_timer:cancel() self.beat_timer = nil
    elseif self.heart_beat.expect > 0 then self.connection:heartbeat(false) end
    self.heart_beat = nil
  end
  local why = self.refused or self.protocol_error
    or ("connection closed (%d%s)"):format(code, (reason or "") ~= "" and (" " .. reason) or "")
  if not info.will_reconnect then self.ended = self.refused or self.protocol_error or self.last_error or why end
  self.protocol_error = nil
  -- The script's handlers first, then the coroutines that waited.
  for _, handler in ipairs(self.on_close_handlers) do handler(self, code, reason, info) end
  local waiting = self.receipts
  self.receipts = {}
  for rid, waiter in pairs(waiting) do
    -- The broker may close without the RECEIPT a DISCONNECT asked for: that close is the answer.
    if rid == self.disconnecting then waiter:set(true)
    else waiter:set(nil, why .. " before the RECEIPT; the frame may or may not have reached the broker") end
  end
  for _, sub in pairs(self.subs) do sub:connection_lost(why, not info.will_reconnect) end
  if not info.will_reconnect then wake(self.connect_waiters, nil, nil, self.ended) end
end

-- What a wait for a RECEIPT got: the receipt's answer, else the timeout in words.
local function receipt_outcome(self, receipt, want, command, timeout, ...)
  if receipt:is_set() then return ... end
  if self.receipts[want] == receipt then self.receipts[want] = nil end
  return nil, ("timeout after %g s: no RECEIPT for %s (receipt %s)"):format(timeout, command, want)
end

-- Sends a frame through the connection's queue (it waits there until CONNECTED).
-- With a receipt: waits for the RECEIPT (true | nil, err).
function Client:frame(command, fixed, headers, body, fname)
  local want = headers and headers.receipt
  local list = header_list(fixed, headers, fname)
  if want == nil or want == false then
    return self.connection:send(encode(command, list, body))
  end
  running(fname)
  if want == true then
    self.receipt_count = self.receipt_count + 1
    want = "rcpt-" .. self.receipt_count
  end
  want = tostring(want)
  list[#list + 1] = { "receipt", want }
  local ok, err = self.connection:send(encode(command, list, body))
  if not ok then return nil, err end
  local timeout = self.options.receipt_timeout
  local receipt = mw.future(fname)
  self.receipts[want] = receipt
  return receipt_outcome(self, receipt, want, command, timeout, receipt:wait(timeout))
end

-- client:send(destination, body [, headers]) -> true | nil, err
function Client:send(destination, body, headers)
  if type(destination) ~= "string" then misuse(("bad argument #1 to 'client:send' (destination string expected, got %s)"):format(type(destination))) end
  if body == nil then body = "" end
  if type(body) ~= "string" then misuse(("bad argument #2 to 'client:send' (body string expected, got %s)"):format(type(body))) end
  return self:frame("SEND", { { "destination", destination }, { "content-length", #body } }, headers, body, "client:send")
end

-- client:subscribe(destination [, opts] [, fn(msg, sub)]) -> sub | nil, err (with a receipt)
-- opts: ack ("auto", "client", "client-individual"), id, headers, receipt, max_queued.
function Client:subscribe(destination, opts, fn)
  if type(destination) ~= "string" then misuse(("bad argument #1 to 'client:subscribe' (destination string expected, got %s)"):format(type(destination))) end
  if type(opts) == "function" and fn == nil then opts, fn = nil, opts end
  opts = opts or {}
  if type(opts) ~= "table" then misuse(("bad argument #2 to 'client:subscribe' (options table expected, got %s)"):format(type(opts))) end
  for k in pairs(opts) do
    if k ~= "ack" and k ~= "id" and k ~= "headers" and k ~= "receipt" and k ~= "max_queued" then
      misuse(("bad argument #2 to 'client:subscribe' (unknown option 'opts.%s')"):format(tostring(k)))
    end
  end
  local ack = opts.ack or "auto"
  if not ACK_MODES[ack] then
    misuse(("bad argument #2 to 'client:subscribe' (opts.ack: \"auto\", \"client\" or \"client-individual\" expected, got %q)"):format(tostring(ack)))
  end
  if fn ~= nil and type(fn) ~= "function" then misuse(("bad argument #3 to 'client:subscribe' (function expected, got %s)"):format(type(fn))) end
  if opts.receipt and not self.connected then
    -- The receipt confirms the SUBSCRIBE itself: it goes once CONNECTED has come.
    local ok, err = self:wait_connected(self.options.receipt_timeout)
    if not ok then return nil, err end
  end
  local id = opts.id
  if id == nil then
    self.sub_count = self.sub_count + 1
    id = "sub-" .. self.sub_count
  end
  id = tostring(id)
  if self.subs[id] then misuse(("client:subscribe: subscription id %q is in use"):format(id)) end
  local sub = setmetatable({ client = self, id = id, destination = destination, ack = ack, fn = fn,
                             extra = opts.headers, waiters = {},
                             max_queued = opts.max_queued or self.options.max_queued, dropped = 0, running = 0 }, Subscription)
  sub.inbox = kit.inbox(sub.max_queued)
  local frame_bytes = sub:frame()   -- checks the headers at the caller's line
  self.subs[id] = sub
  sub.made = self.connected
  if self.connected then
    -- Made now; otherwise the CONNECTED that is coming makes it.
    if opts.receipt then
      local ok, err = self:frame("SUBSCRIBE", sub:fixed_headers(), { receipt = opts.receipt }, nil, "client:subscribe")
      if not ok then
        self.subs[id] = nil
        return nil, err
      end
      return sub
    end
    self.connection:send(frame_bytes)
  end
  return sub
end

function Subscription:fixed_headers()
  local fixed = { { "destination", self.destination }, { "id", self.id }, { "ack", self.ack } }
  local extra = self.extra
  -- With client acks, the broker holds back what would not fit (RabbitMQ's prefetch-count).
  if self.ack ~= "auto" and not (extra and extra["prefetch-count"]) then
    fixed[#fixed + 1] = { "prefetch-count", self.max_queued }
  end
  if extra then
    local list = header_list({}, extra, "client:subscribe")
    for _, h in ipairs(list) do
      if h[1] ~= "destination" and h[1] ~= "id" and h[1] ~= "ack" then fixed[#fixed + 1] = h end
    end
  end
  return fixed
end

function Subscription:frame() return encode("SUBSCRIBE", self:fixed_headers()) end

function Subscription:deliver(frame)
  local msg = setmetatable({ command = "MESSAGE", headers = frame.headers, body = frame.body,
                             destination = frame.headers.destination, id = frame.headers["message-id"],
                             subscription = self, generation = self.client.generation }, Message)
  local q = self.inbox
  if self.fn then
    -- Each message runs the function in a coroutine of its own; those still
    -- running (waiting for something) count against max_queued as unread messages do.
    if self.running < self.max_queued then
      self.running = self.running + 1
      mw.spawn(function()
        local ok, err = pcall(self.fn, msg, self)
        self.running = self.running - 1
        if not ok then error(err, 0) end
      end)
      return
    end
  elseif self.waiters[1] then
    return table.remove(self.waiters, 1).future:set(msg)
  elseif q:count() < self.max_queued then
    q:push(msg)
    return
  end
  -- Bounded: with client acks the broker keeps it (NACK: it comes again; the
  -- prefetch-count the subscription asked for makes that rare); with auto acks
  -- it is gone. Both are counted.
  self.dropped = self.dropped + 1
  if self.ack ~= "auto" then msg:nack() end
  if self.dropped == 1 or self.dropped % 1000 == 0 then
    self.client:emit_error(("stomp: subscription %s: %d messages wait unread or in its function (max_queued); %s"):format(self.id, self.max_queued,
      self.ack == "auto" and ("dropped " .. self.dropped .. " so far (ack = \"auto\")") or "NACKed, the broker delivers them again"), frame)
  end
end

-- sub:receive([timeout]) -> msg | nil, err
function Subscription:receive(timeout)
  if self.fn then misuse("sub:receive: this subscription has a callback, which gets its messages") end
  local msg = self.inbox:pop()
  if msg then return msg end
  if self.ended then return nil, self.ended end
  return wait_in(self.waiters, "sub:receive", timeout, "no MESSAGE on " .. self.destination)
end

function Subscription:connection_lost(why, final)
  if final then
    self.ended = why
    wake(self.waiters, nil, nil, why)
  end
end

-- sub:unsubscribe([headers]) -> true | nil, err
function Subscription:unsubscribe(headers)
  local client = self.client
  if client.subs[self.id] ~= self then return true end
  client.subs[self.id] = nil
  self.ended = "unsubscribed"
  wake(self.waiters, nil, nil, "unsubscribed")
  if not client.connected then return true end
  return client:frame("UNSUBSCRIBE", { { "id", self.id } }, headers, nil, "sub:unsubscribe")
end

-- ACK / NACK of a message: `id` is its ack header. A message that came on a
-- connection that has since closed cannot be acknowledged any more: the broker
-- delivers it again.
local function acknowledge(client, command, msg, headers, fname)
  if getmetatable(msg) ~= Message then misuse(("bad argument #1 to '%s' (a MESSAGE from a subscription expected)"):format(fname)) end
  if msg.subscription.ack == "auto" then
    misuse(("%s: subscription %s has ack = \"auto\"; the broker acknowledged the message itself"):format(fname, msg.subscription.id))
  end
  if msg.generation ~= client.generation or not client.connected then
    return nil, ("%s: the message came on a connection that has closed since; the broker delivers it again"):format(command)
  end
  local ack = msg.headers.ack
  if not ack then return nil, command .. ": the MESSAGE has no ack header" end
  return client:frame(command, { { "id", ack } }, headers, nil, fname)
end

function Client:ack(msg, headers) return acknowledge(self, "ACK", msg, headers, "client:ack") end
function Client:nack(msg, headers) return acknowledge(self, "NACK", msg, headers, "client:nack") end
function Message:ack(headers) return acknowledge(self.subscription.client, "ACK", self, headers, "msg:ack") end
function Message:nack(headers) return acknowledge(self.subscription.client, "NACK", self, headers, "msg:nack") end

-- Transactions: client:begin(tx), client:commit(tx), client:abort(tx); SEND and ACK take headers.transaction.
for _, command in ipairs { "BEGIN", "COMMIT", "ABORT" } do
  local fname = "client:" .. command:lower()
  Client[command:lower()] = function(self, tx, headers)
    if type(tx) ~= "string" then misuse(("bad argument #1 to '%s' (transaction name expected, got %s)"):format(fname, type(tx))) end
    return self:frame(command, { { "transaction", tx } }, headers, nil, fname)
  end
end

-- client:wait_connected([timeout]) -> the CONNECTED headers | nil, err
function Client:wait_connected(timeout)
  if self.connected then return self.connected_headers end
  if self.ended then return nil, self.ended end
  return wait_in(self.connect_waiters, "client:wait_connected", timeout, "no CONNECTED from the broker ("
    .. (self.last_error or "no answer") .. ")")
end

-- client:disconnect([timeout]): DISCONNECT with a receipt, then the close.
function Client:disconnect(timeout)
  local ok, err = true, nil
  if self.connected then
    local saved = self.options.receipt_timeout
    self.options.receipt_timeout = timeout or saved
    self.receipt_count = self.receipt_count + 1
    self.disconnecting = "rcpt-" .. self.receipt_count
    ok, err = self:frame("DISCONNECT", {}, { receipt = self.disconnecting }, nil, "client:disconnect")
    self.options.receipt_timeout = saved
  end
  self.connection:close()
  return ok, err
end

function Client:close(code, reason) return self.connection:close(code, reason) end

kit.define_handlers(Client, "client", { "connected", "error", "close" })

return stomp
