-- Connections (mw.connect): the Lua side of each connection, keyed by its
-- userdata, and the dispatchers (`events`) Swift calls with its events.

local host, prelude = ...
local mw, user_level, bad_argument, running_coroutine = prelude.mw, prelude.user_level, prelude.bad_argument, prelude.running_coroutine
local resume, resumed, waiting_in, session_of = prelude.resume, prelude.resumed, prelude.waiting_in, prelude.session_of
local NONE, append, state_lookup, define_handlers = prelude.NONE, prelude.append, prelude.state_lookup, prelude.define_handlers
local queue = prelude.queue

-- codec = "json", "msgpack" or "cbor" (host.native_codecs): mw.json, mw.msgpack or
-- mw.cbor in native code, which Swift runs on the message's bytes (decode) and into
-- the outbound frame (encode); `native` tells the prelude to leave both to Swift.
-- Its decode is for heartbeat replies, which arrive as strings. A codec of
-- mw.protobuf.codec(name) (the plain form) runs the same way: Swift gets its schema
-- and message index (`schema`, `index`), kept by the connection's or server's userdata.
local native_codecs = {}
local native_names = {}
for name in pairs(host.native_codecs) do native_names[#native_names + 1] = ("%q"):format(name) end
table.sort(native_names)
native_names = table.concat(native_names, ", ")

-- A copy of `opts` without its codec, which stays on this side, and the codec.
-- A native codec's name stays in the copy too: Swift decodes and encodes for it.
local function without_codec(opts, fname)
  local copy = {}
  for k, v in pairs(opts) do copy[k] = v end
  local codec = copy.codec
  copy.codec = nil
  if type(codec) == "string" and host.native_codecs[codec] then
    local module = mw[codec]
    -- decode(message, kind): the kind is not an option of the module's decode.
    native_codecs[codec] = native_codecs[codec]
      or { encode = module.encode, decode = function(s) return module.decode(s) end, native = true,
           shown = ("%q"):format(codec) }
    copy.codec = codec
    return copy, native_codecs[codec]
  end
  local schema, index = prelude.protobuf_type(codec)
  if schema then
    return copy, { encode = codec.encode, decode = codec.decode, native = true, kind = codec.kind, schema = schema,
                   index = index, shown = ("mw.protobuf.codec(%q)"):format(codec.protobuf) }
  end
  if codec ~= nil and (type(codec) ~= "table" or (codec.encode ~= nil and type(codec.encode) ~= "function")
      or (codec.decode ~= nil and type(codec.decode) ~= "function")) then
    error(("bad argument #2 to '%s' (opts.codec: %s or { encode = function, decode = function } expected)"):format(fname, native_names), user_level(3))
  end
  return copy, codec
end

-- Swift owns the socket; the Lua side of a connection (its handlers, the
-- coroutines waiting in receive/request/wait_open, the inbox and the codec)
-- lives here, keyed by the connection userdata.
--
-- A message goes, in this order, to: every waiting request whose match
-- accepts it, else the oldest waiting receive; else to every on_message
-- handler; else, when there is no handler, to the inbox that receive reads
-- first. The inbox never drops: once it holds INBOX_LIMIT messages, Swift stops
-- reading from the socket (TCP pushes back on the peer) until receive has taken
-- it down to half.

local INBOX_LIMIT = 4096
local conns = setmetatable({}, { __mode = "k" })
-- The Lua side of a server's peers, made at on_connect: { owner = the server's
-- state (codec, auto_reply rules, handlers), codec, kind, on_drain, waiters, final,
-- peer = true } (a connection's `owner` is its own state). A connection's state and a peer's are both a session's: the
-- methods and events both roles have read either (prelude/sessions.lua).
local peer_states = setmetatable({}, { __mode = "k" })
local methods = host.connection_methods
-- Either class's session: the Swift half of reroute (sessions.lua takes it off the
-- method tables).
local raw_route = methods._route

local state_of = state_lookup(conns, "a connection from mw.connect")

-- Where Swift delivers the messages of the session whose state is `st`: straight to
-- its one on_message handler (the state's `route`) when events.message would do
-- nothing but call that handler, else to events.message. What events.message looks
-- at before it calls the handlers is looked at here too, and reroute runs whenever
-- any of it changes: handlers added or dropped, waiters coming and going, auto_reply
-- rules, the heartbeat's reply. A codec of Swift's (codec.native) decodes before
-- either; a message it cannot decode goes to events.message.
local function direct_route(st)
  local owner, codec = st.owner, st.codec
  local handlers = owner.on_message
  if not handlers[1] or handlers[2] or owner.auto_rules or st.waiters[1] or st.hb_reply then return false end
  if codec and not codec.native then return false end
  return handlers[1]
end

local function reroute(st)
  local session = st.session
  if session == nil then return end
  local route = direct_route(st)
  if route ~= st.route then
    st.route = route
    raw_route(session, route)
  end
end

-- The handlers or rules of `owner` changed: a connection's own state, or a server's,
-- whose peers (owner.peers) all follow its handlers.
local function reroute_owner(owner)
  if owner.session then return reroute(owner) end
  for pst in pairs(owner.peers or NONE) do reroute(pst) end
end

local function handlers_changed(st, key)
  if key == "on_message" then reroute_owner(st) end
end

-- Why `p` is not a valid Lua pattern, or nil. Matching it against a string
-- would find only the errors the match happens to reach, so the pattern is
-- read the way lstrlib.c reads it.
local function pattern_error(p)
  local i, n, open = 1, #p, 0
  local byte = string.byte
  while i <= n do
    local c = byte(p, i)
    if c == 37 then -- %
      if i == n then return "malformed pattern (ends with '%')" end
      local d = byte(p, i + 1)
      if d == 98 then -- %b
        if i + 3 > n then return "missing arguments to '%b'" end
        i = i + 4
      elseif d == 102 then -- %f
        if byte(p, i + 2) ~= 91 then return "missing '[' after '%f' in pattern" end
        i = i + 2
      else
        i = i + 2
      end
    elseif c == 91 then -- [
      local j = i + 1
      if byte(p, j) == 94 then j = j + 1 end
      repeat
        if j > n then return "malformed pattern (missing ']')" end
        local e = byte(p, j)
        j = j + 1
        if e == 37 then j = j + 1 end
      until byte(p, j) == 93
      i = j + 1
    elseif c == 40 then
      open = open + 1
      i = i + 1
    elseif c == 41 then
      if open == 0 then return "invalid pattern capture" end
      open = open - 1
      i = i + 1
    else
      i = i + 1
    end
  end
  if open > 0 then return "unfinished capture" end
  local ok, err = pcall(string.find, "", p)
  if not ok then return (tostring(err):gsub("^.-: ", "")) end
end

-- The heartbeat's message (a string or a function), reply (a pattern or a
-- function) and kind stay on this side, unchecked: Swift checks the whole option and
-- words its errors (HeartbeatOption). What Swift cannot hold or check it gets
-- described: { type = type(v) }, and for a reply string whether it is a valid Lua
-- pattern ({ quoted = "%q" of it, pattern_error = why not }).
local KINDS = { text = true, binary = true }
local function describe(v, is_pattern)
  if v == nil then return nil end
  local d = { type = type(v) }
  if is_pattern and d.type == "string" then d.quoted, d.pattern_error = ("%q"):format(v), pattern_error(v) end
  return d
end
local function split_heartbeat(hb)
  if type(hb) ~= "table" then return hb end
  local copy = {}
  for k, v in pairs(hb) do copy[k] = v end
  copy.message, copy.reply = describe(hb.message), describe(hb.reply, true)
  if type(hb.kind) == "function" then copy.kind = describe(hb.kind) end
  return copy, hb.message, hb.reply, hb.kind
end

-- opts.auto_reply: one rule { match =, reply = } or a list of them. A rule of two
-- strings stays in `opts` for Swift, which answers the exact bytes before the message
-- reaches Lua; a rule with a function comes out, into the list returned, for
-- auto_answer. The option is checked here, whole, with the rule's index in errors.
local function split_auto_reply(opts, fname, codec)
  local given = opts.auto_reply
  if given == nil then return nil end
  local function bad(where, what)
    error(("bad argument #2 to '%s' (opts.auto_reply%s: %s)"):format(fname, where, what), user_level(3))
  end
  if type(given) ~= "table" then bad("", "a rule { match =, reply = } or a list of rules expected, got " .. type(given)) end
  local list = given
  if given.match ~= nil or given.reply ~= nil then list = { given } end
  if #list == 0 then bad("", "a rule { match =, reply = } or a list of rules expected") end
  for i in pairs(list) do
    if math.type(i) ~= "integer" or i < 1 or i > #list then bad("", "a list of rules expected (a sequence, no other keys)") end
  end
  local exact, scripted = {}, {}
  for i, rule in ipairs(list) do
    local where = list == given and ("[" .. i .. "]") or ""
    if type(rule) ~= "table" then bad(where, "a rule { match =, reply = } expected, got " .. type(rule)) end
    for key in pairs(rule) do
      if key ~= "match" and key ~= "reply" then bad(where, "unknown key '" .. tostring(key) .. "' (a rule has match and reply)") end
    end
    for _, key in ipairs { "match", "reply" } do
      local v = rule[key]
      if type(v) ~= "string" and type(v) ~= "function" then
        bad(where .. "." .. key, "string or function expected, got " .. type(v))
      end
    end
    if type(rule.match) == "string" and type(rule.reply) == "string" then
      exact[#exact + 1] = { match = rule.match, reply = rule.reply }
    elseif type(rule.match) == "string" and codec and codec.native then
      -- With a native codec only the decoded value reaches Lua: no bytes to compare.
      bad(where .. ".match", "with codec = " .. codec.shown .. " a string match needs a string reply "
        .. '(the bytes are matched before decoding); match the decoded message with a function')
    else
      scripted[#scripted + 1] = rule
    end
  end
  opts.auto_reply = exact[1] and exact or nil
  return scripted[1] and scripted or nil
end

-- Is `message` a probe one of the scripted auto_reply `rules` answers? Then the
-- answer goes out to `target` (a connection or a peer; Swift counts it) and true
-- is returned: the message is consumed. A string match is the message as received
-- (`raw`); a function gets it decoded, as a reply function does, whose result goes
-- through encode(st, data) (the codec of the connection or server whose state is `st`).
local host_answer = host.auto_answer
local function auto_answer(rules, target, encode, st, raw, message, kind)
  for i = 1, #rules do
    local rule = rules[i]
    local match = rule.match
    local hit
    if type(match) == "string" then hit = raw == match else hit = match(message, kind) end
    if hit then
      local reply = rule.reply
      if type(reply) == "function" then
        reply = encode(st, reply(message, kind), "auto_reply")
        -- codec = "json" encodes sends in Swift; a probe's answer is rare enough to take a string.
        if st.codec and st.codec.native then reply = st.codec.encode(reply) end
        if type(reply) ~= "string" then
          error("auto_reply: the reply function returned a " .. type(reply) .. ", not a string", 0)
        end
      end
      host_answer(target, reply, (kind == "text" and not utf8.len(reply)) and "binary" or kind)
      return true
    end
  end
  return false
end

function mw.connect(url, opts)
  prelude.check_endpoint("mw.connect", url, opts)
  local codec, hb_message, hb_reply, hb_kind, framer, kind, auto_rules
  if opts then
    local copy
    copy, codec = without_codec(opts, "mw.connect")
    auto_rules = split_auto_reply(copy, "mw.connect", codec)
    copy.heartbeat, hb_message, hb_reply, hb_kind = split_heartbeat(copy.heartbeat)
    -- opts.kind: what c:send uses without a kind ("auto": none). Swift checks it with
    -- the other options; a codec may name its frames' kind (mw.protobuf's are binary),
    -- and opts.kind wins.
    kind = copy.kind ~= "auto" and copy.kind or nil
    kind = kind or (codec and codec.kind)
    if type(copy.framing) == "function" then
      framer, copy.framing = copy.framing, "custom"
    end
    opts = copy
  end
  local c = host.connect(url, opts, codec and codec.schema, codec and codec.index)
  -- Every field read per message is present (false rather than nil): a missing key
  -- costs the Lua VM a second lookup (for a metatable) on every read.
  local st = { codec = codec or false, on_open = NONE, on_message = NONE, on_close = NONE, on_error = NONE,
               on_reconnect = NONE, on_drain = NONE, on_ready = NONE, waiters = NONE, inbox = NONE, final = false,
               hb_message = hb_message, hb_reply = hb_reply, framer = framer, kind = kind, hb_kind = hb_kind,
               auto_rules = auto_rules or false, decoded_raw = false }
  -- Whose codec, auto_reply rules and on_message handlers apply: a connection's own.
  st.owner, st.session, st.route = st, c, false
  conns[c] = st
  local session = session_of[coroutine.running()]
  if session then session.conns[c] = true end
  return c
end

local raw_heartbeat = methods.heartbeat
function methods.heartbeat(self, opts)
  local st = state_of(self, "c:heartbeat")
  local copy, message, reply, kind = split_heartbeat(opts, "c:heartbeat", 1, "opts")
  raw_heartbeat(self, copy)
  st.hb_message, st.hb_reply, st.hb_kind = message, reply, kind
  reroute(st)
end

define_handlers(methods, "c", { "open", "message", "close", "error", "reconnect", "ready" }, state_of, nil, handlers_changed)

-- c:reconnect() brings a closed connection back: receive and wait_open wait again.
local raw_reconnect = methods.reconnect
function methods.reconnect(self, ...)
  local st = state_of(self, "c:reconnect")
  raw_reconnect(self, ...)
  if select("#", ...) == 0 then st.final = false end
  -- Brought back after it ended, it has a route in Swift again.
  st.route = false
  reroute(st)
end

-- `data` through the codec of the connection or server whose state is `st` (a peer
-- of a server no longer listening has none), if it encodes; errors at the caller of `fname`.
local function encode_message(st, data, fname)
  local codec = st and st.codec
  if codec and codec.encode and not codec.native then
    data = codec.encode(data)
    if type(data) ~= "string" then
      error(fname .. ": the codec's encode returned a " .. type(data) .. ", not a string", user_level(2))
    end
  end
  return data
end

-- Suspends the running coroutine as a waiter of `kind` until woken, or until
-- `timeout` seconds passed (then returns nil, "timeout").
-- Checks a timeout argument; the error names the user's line (level 2 is
-- skipped only when it is moonwire's: receive tail-calls wait).
local function check_timeout(fname, timeout)
  if timeout ~= nil and (type(timeout) ~= "number" or timeout < 0) then
    error(("bad argument to '%s' (timeout: seconds expected, got %s)"):format(fname, type(timeout)), user_level(2))
  end
end

local function wait(st, fname, kind, timeout, match)
  check_timeout(fname, timeout)
  local waiter = { co = running_coroutine(fname), kind = kind, match = match }
  append(st, "waiters", waiter)
  reroute(st)
  if timeout then
    waiter.timer = host.after(timeout, function()
      for i, w in ipairs(st.waiters) do
        if w == waiter then
          table.remove(st.waiters, i)
          reroute(st)
          resume(waiter.co, nil, "timeout")
          return
        end
      end
    end)
  end
  waiting_in[waiter.co] = fname
  return resumed(waiter.co, coroutine.yield())
end

-- Wakes the waiters `pick` chooses (called with each waiter, in order), after
-- taking them out of the list: a woken coroutine may wait again at once.
local function wake(st, pick, ...)
  local chosen, keep = {}, {}
  for _, w in ipairs(st.waiters) do
    if pick(w) then chosen[#chosen + 1] = w else keep[#keep + 1] = w end
  end
  if #chosen == 0 then return false end
  st.waiters = keep
  reroute(st)
  for _, w in ipairs(chosen) do
    if w.timer then w.timer:cancel() end
    resume(w.co, ...)
  end
  return true
end

local function is_kind(kind)
  return function(w) return w.kind == kind end
end

local function is_data_waiter(w)
  return w.kind == "receive" or w.kind == "request" or w.kind == "expect"
end

-- Is every key of `want` in `got` with an equal value (tables compared the same way)?
local function contains(got, want)
  if type(got) ~= "table" then return false end
  for k, v in pairs(want) do
    local g = got[k]
    if type(v) == "table" and getmetatable(v) == nil then
      if not contains(g, v) then return false end
    elseif g ~= v then
      return false
    end
  end
  return true
end

-- The match of c:request and c:expect: a function(msg, kind) -> truthy, a Lua
-- pattern (for string messages), or a table that must be a subset of the
-- decoded message; nil (with `allow_any`) takes any message.
local function matcher(match, argn, fname, allow_any)
  local t = type(match)
  if t == "function" then return match end
  if match == nil and allow_any then return function() return true end end
  if t == "string" then
    local err = pattern_error(match)
    if err then error(("bad argument #%d to '%s' (bad Lua pattern %q: %s)"):format(argn, fname, match, err), 3) end
    return function(msg) return type(msg) == "string" and msg:find(match) ~= nil end
  end
  if t == "table" then
    return function(msg) return contains(msg, match) end
  end
  error(("bad argument #%d to '%s' (function, Lua pattern or table expected, got %s)"):format(argn, fname, t), user_level(3))
end

-- The inbox: the prelude's queue, made at the first message kept, without a limit
-- (reading pauses at INBOX_LIMIT instead).
local function inbox_push(st, item)
  local q = st.inbox
  if q == NONE then
    q = queue()
    st.inbox = q
  end
  q:push(item)
  return q:count()
end

local raw_pause_reading = methods._pause_reading
methods._pause_reading = nil

-- Reading resumes once the script took half of what paused it.
local function inbox_taken(self, st, q)
  if st.paused and q:count() <= INBOX_LIMIT // 2 then
    st.paused = false
    raw_pause_reading(self, false)
  end
end

local function inbox_pop(self, st)
  local q = st.inbox
  if q == NONE then return nil end
  local item = q:pop()
  if item then inbox_taken(self, st, q) end
  return item
end

-- The first message in the inbox that `match` accepts, taken out of it.
local function inbox_take(self, st, match)
  local q = st.inbox
  if q == NONE then return nil end
  local item = q:take(function(kept) return not kept.failed and match(kept[1], kept[2]) end)
  if item then inbox_taken(self, st, q) end
  return item
end

function methods.receive(self, timeout)
  local st = state_of(self, "c:receive")
  check_timeout("c:receive", timeout)
  local first = inbox_pop(self, st)
  if first then return first[1], first[2] end
  if st.final then return nil, "closed" end
  return wait(st, "c:receive", "receive", timeout)
end

-- ready = "manual": c:send_now(data [, kind]) passes the held queue (the
-- application's handshake), c:ready() releases it in order and runs on_ready;
-- the state is then "ready" until the connection closes.
local raw_send_now, raw_ready, raw_state = methods.send_now, methods.ready, methods.state
function methods.send_now(self, data, kind)
  local st = state_of(self, "c:send_now")
  return raw_send_now(self, encode_message(st, data, "c:send_now"), kind or st.kind)
end

function methods.ready(self)
  local st = state_of(self, "c:ready")
  if not raw_ready(self) then return false end
  st.released = true
  for _, handler in ipairs(st.on_ready) do handler(self) end
  return true
end

function methods.state(self)
  local st = state_of(self, "c:state")
  local state = raw_state(self)
  if state == "open" and st.released then return "ready" end
  return state
end

function methods.wait_open(self, timeout)
  local st = state_of(self, "c:wait_open")
  check_timeout("c:wait_open", timeout)
  local state = self:state()
  if state == "open" or state == "ready" then return true end
  if st.final then return nil, st.last_error or "closed" end
  return wait(st, "c:wait_open", "open", timeout)
end

-- Coroutines started by mw.rate, with the time they were meant to start: their
-- first request's or expect's latency counts from then (coordinated omission corrected).
local intended_start = setmetatable({}, { __mode = "k" })

local function latency_start()
  local co = coroutine.running()
  local started = intended_start[co] or host.now()
  intended_start[co] = nil
  return started
end

-- The last argument of c:expect and c:request: seconds, or { timeout =, kind = }.
-- Returns the timeout and `match` narrowed to messages of that kind.
local function wait_options(fname, argn, opts, match)
  if type(opts) ~= "table" then return opts, match end
  local timeout, kind = opts.timeout, opts.kind
  for k in pairs(opts) do
    if k ~= "timeout" and k ~= "kind" then
      error(("bad argument #%d to '%s' (unknown option 'opts.%s'; the options are timeout and kind)"):format(argn, fname, tostring(k)), user_level(3))
    end
  end
  if kind ~= nil and not KINDS[kind] then
    error(("bad argument #%d to '%s' (opts.kind: \"text\" or \"binary\" expected, got %s)")
      :format(argn, fname, type(kind) == "string" and ("%q"):format(kind) or type(kind)), user_level(3))
  end
  if kind == nil then return timeout, match end
  return timeout, function(msg, k) return k == kind and match(msg, k) end
end

function methods.request(self, message, match, timeout)
  local st = state_of(self, "c:request")
  match = matcher(match, 2, "c:request", true)
  timeout, match = wait_options("c:request", 3, timeout, match)
  running_coroutine("c:request")
  if message == nil then bad_argument(1, "c:request", "message", message) end
  local started = latency_start()
  local ok, err = self:send(message)
  if not ok then return nil, err end
  local reply, kind = wait(st, "c:request", "request", timeout, match)
  if reply ~= nil then host.metric_observe(host.request_latency, host.now() - started) end
  return reply, kind
end

-- Waits for the next inbound message that `match` accepts, without sending;
-- the message goes to this waiter instead of receive or on_message. The wait
-- is recorded in expect_latency.
function methods.expect(self, match, timeout)
  local st = state_of(self, "c:expect")
  match = matcher(match, 1, "c:expect", true)
  timeout, match = wait_options("c:expect", 2, timeout, match)
  local started = latency_start()
  -- A message that arrived before (kept in the inbox, no on_message handler) counts.
  local kept = inbox_take(self, st, match)
  if kept then
    host.metric_observe(host.expect_latency, host.now() - started)
    return kept[1], kept[2]
  end
  if st.final then return nil, "closed" end
  local reply, kind = wait(st, "c:expect", "expect", timeout, match)
  if reply ~= nil then host.metric_observe(host.expect_latency, host.now() - started) end
  return reply, kind
end

-- c:answer(match, reply): one more of the peer's pings answered for the script,
-- as a rule of auto_reply with a function: `match` as in c:expect, `reply` a
-- message (through the codec, as c:send sends it) or fn(msg, kind) -> message.
function methods.answer(self, match, reply)
  local st = state_of(self, "c:answer")
  match = matcher(match, 1, "c:answer")
  local t = type(reply)
  if t ~= "function" and t ~= "string" and t ~= "table" then
    error(("bad argument #2 to 'c:answer' (message or function expected, got %s)"):format(t), user_level(2))
  end
  local answer = reply
  if t ~= "function" then answer = function() return reply end end
  local rules = st.auto_rules or {}
  rules[#rules + 1] = { match = match, reply = answer }
  st.auto_rules = rules
  reroute(st)
end

local events = {}

function events.open(c, info)
  local st = conns[c]
  if not st then return end
  for _, handler in ipairs(st.on_open) do handler(c, info) end
  wake(st, is_kind("open"), true)
end

-- A message the codec could not decode (counted in the `errors` metric): the script hears of it in words, with the
-- raw message (on_error handlers get it as a third argument; without a handler, and
-- always for a peer, it is logged, naming the connection or the peer); a waiting
-- c:receive returns nil, "decode: ..." (else the next one does); request, expect and
-- on_message do not see it.
local function decode_failed(c, st, owner, err, raw)
  local text = "decode: " .. tostring(err)
  host.metric_add(host.errors_metric, 1)
  if st.on_error[1] then
    for _, handler in ipairs(st.on_error) do handler(c, text, raw) end
  else
    -- Text quoted (its first 200 bytes), anything else (not UTF-8, or control bytes
    -- other than tab and line ends) in hex (its first 64).
    local shown
    if utf8.len(raw) and not raw:find("[%z\1-\8\11\12\14-\31\127]") then
      shown = ("%q"):format(#raw > 200 and raw:sub(1, 200) .. "..." or raw)
    else
      shown = "hex " .. raw:sub(1, 64):gsub(".", function(ch) return ("%02x"):format(ch:byte()) end) .. (#raw > 64 and "..." or "")
    end
    local who = st.peer and ("peer " .. tostring(c.id)) or "connection"
    host.log("warn", ("%s: %s; the message (%d bytes): %s"):format(who, text, #raw, shown))
  end
  local taken = st.waiters[1] and wake(st, is_kind("receive"), nil, text)
  if not taken and st.inbox and not owner.on_message[1] then inbox_push(st, { nil, text, failed = true }) end
end

-- A message of a connection or a peer (`c`), the one dispatcher of both roles. With
-- codec = "json" it comes decoded from Swift, or with the decode error and the raw
-- message. A peer's codec, auto_reply rules and on_message handlers are its
-- server's (`owner`); only a connection has waiters and an inbox.
-- A session whose state has a route (direct_route) gets its messages there instead.
function events.message(c, message, kind, err, raw)
  local st = conns[c] or peer_states[c]
  if not st then return end
  local owner = st.owner
  local codec = st.codec
  if err ~= nil then return decode_failed(c, st, owner, err, raw) end
  if st.decoded_raw then
    -- Decoded already, to match it against heartbeat.reply.
    if codec.native then
      st.decoded_raw, st.decoded = false, nil
    else
      raw = message
      if st.decoded_raw == message then message = st.decoded else message, err = codec.decode(message, kind) end
      st.decoded_raw, st.decoded = false, nil
      if message == nil and err ~= nil then return decode_failed(c, st, owner, err, raw) end
    end
  elseif codec and codec.decode and not codec.native then
    raw = message
    message, err = codec.decode(message, kind)
    if message == nil and err ~= nil then return decode_failed(c, st, owner, err, raw) end
  end
  local rules = owner.auto_rules
  if rules and auto_answer(rules, c, encode_message, owner, raw or message, message, kind) then
    return
  end
  if st.waiters[1] then
    local received = false
    local taken = wake(st, function(w)
      if w.match then return w.match(message, kind) and true or false end
      if w.kind == "receive" and not received then
        received = true
        return true
      end
      return false
    end, message, kind)
    if taken then return end
  end
  local handlers = owner.on_message
  if handlers[1] then
    for i = 1, #handlers do handlers[i](c, message, kind) end
  elseif st.inbox and inbox_push(st, { message, kind }) >= INBOX_LIMIT and not st.paused then
    st.paused = true
    raw_pause_reading(c, true)
  end
end

-- The send budget of a connection or a peer: on_drain handlers, then the coroutines
-- waiting in drain().
function events.drain(c)
  local st = conns[c] or peer_states[c]
  if not st then return end
  for _, handler in ipairs(st.on_drain) do handler(c) end
  wake(st, is_kind("drain"), true)
end

function events.close(c, code, reason, info)
  local st = conns[c]
  if not st then return end
  st.released = nil
  if not info.will_reconnect then st.final = true end
  for _, handler in ipairs(st.on_close) do handler(c, code, reason, info) end
  wake(st, is_data_waiter, nil, "closed")
  if st.final then
    wake(st, is_kind("open"), nil, st.last_error or "closed")
    wake(st, is_kind("drain"), nil, "closed")
  end
end

function events.error(c, err)
  local st = conns[c]
  if not st then return end
  st.last_error = err
  if st.on_error[1] then
    for _, handler in ipairs(st.on_error) do handler(c, err) end
  else
    host.log("warn", "connection error: " .. err)
  end
end

-- The first handler that answers decides: false stops retrying, a table
-- changes the attempt ({ delay =, url =, headers = }).
function events.reconnect(c, attempt, delay)
  local st = conns[c]
  if not st then return end
  for _, handler in ipairs(st.on_reconnect) do
    local answer = handler(c, attempt, delay)
    if answer ~= nil then return answer end
  end
end

function events.heartbeat_message(c)
  local st = conns[c]
  local message = st and st.hb_message
  if type(message) == "function" then message = message() end
  if type(message) ~= "string" then
    error("heartbeat.message: the function returned a " .. type(message) .. ", not a string", 0)
  end
  local kind = st.hb_kind or st.kind or (utf8.len(message) and "text" or "binary")
  return message, kind
end

-- A framing function: fn(buffer) -> message, consumed | nil.
function events.frame(c, buffer)
  local st = conns[c]
  local message, consumed = st.framer(buffer)
  if message == nil then return nil end
  if type(message) ~= "string" or math.type(consumed) ~= "integer" then
    error("framing function: message (string) and consumed (integer) expected, got "
      .. type(message) .. " and " .. type(consumed), 0)
  end
  return message, consumed
end

-- Does this message answer the heartbeat? A pattern is matched against the
-- message as received, a function is called with it decoded (the decoded
-- message is kept for events.message, which follows for a message that is not
-- a reply: decoded once). A reply is consumed: no handler or waiter sees it.
function events.heartbeat_reply(c, message, kind)
  local st = conns[c]
  local reply = st and st.hb_reply
  if reply == nil then return false end
  if type(reply) == "string" then return message:find(reply) ~= nil end
  local decoded = message
  local codec = st.codec
  if codec and codec.decode then
    decoded = codec.decode(message, kind)
    st.decoded_raw, st.decoded = message, decoded
  end
  if reply(decoded) then
    st.decoded_raw, st.decoded = false, nil
    return true
  end
  return false
end

prelude.events, prelude.conns, prelude.connection_methods, prelude.raw_state = events, conns, methods, raw_state
prelude.intended_start, prelude.without_codec, prelude.split_auto_reply = intended_start, without_codec, split_auto_reply
prelude.auto_answer, prelude.wait, prelude.wake, prelude.is_kind = auto_answer, wait, wake, is_kind
prelude.encode_message = encode_message
prelude.reroute, prelude.reroute_owner, prelude.handlers_changed = reroute, reroute_owner, handlers_changed
prelude.peer_states = peer_states
