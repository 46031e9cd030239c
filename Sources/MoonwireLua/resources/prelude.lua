-- The parts of the `mw` module written in Lua. Loaded once per Lua state with
-- the Swift bindings (`host`) as its argument; returns the module, the
-- function that starts a script's main chunk, and the internals the test
-- runner builds on.
--
-- Design rules:
--  * Calls that look blocking (mw.sleep, and the connection's receive,
--    wait_open, request) yield here, in Lua, with coroutine.yield. Nothing
--    yields from C or Swift.
--  * Every coroutine moonwire starts is resumed through `resume`, which reports
--    an uncaught error with that coroutine's own traceback.
--  * Misuse raises at the caller's line (error level 2); failures from outside
--    the script return nil, err.

local host = ...
local EXIT = host.exit_sentinel

local mw = {}

-- mw.inspect, once loaded (below).
local inspect_value

-- The text of an error value. One that is not a string (error({ code = 42 }),
-- error()) is printed, a table through mw.inspect, after the line of the
-- user's code that raised it: on the running stack (`where` nil), in the dead
-- coroutine `where`, or nowhere (`where` false).
local function describe(err, where)
  if type(err) == "string" then return err end
  local meta = getmetatable(err)
  if meta and meta.__tostring then return tostring(err) end
  local text = err == nil and "Nil error" or (type(err) == "table" and inspect_value) and inspect_value(err) or tostring(err)
  if where == false then return text end
  for level = where and 0 or 2, 60 do
    local info
    if where then info = debug.getinfo(where, level, "Sl") else info = debug.getinfo(level, "Sl") end
    if not info then break end
    if info.what ~= "C" and info.source:sub(1, 10) ~= "@moonwire/" and info.currentline > 0 then
      return info.short_src .. ":" .. info.currentline .. ": " .. text
    end
  end
  return text
end

-- Coroutines a test runner gave up on (timed out): never resumed again.
local abandoned = setmetatable({}, { __mode = "k" })
-- What each waiting coroutine waits in ("c:receive"), for a timeout's message.
local waiting_in = setmetatable({}, { __mode = "k" })
-- The mw.vus session each of its coroutines (and those they spawned) belongs to:
-- the connections they open are the session's, closed when it ends.
local session_of = setmetatable({}, { __mode = "k" })

local function resumed(co, ...)
  waiting_in[co] = nil
  return ...
end

local function resume(co, ...)
  if abandoned[co] then return end
  local ok, err = coroutine.resume(co, ...)
  if not ok then
    -- mw.exit unwinds every coroutine on its way out; pass it on.
    if err == EXIT then error(EXIT, 0) end
    host.uncaught(debug.traceback(co, describe(err, co)))
  end
end

-- The level, as error() counts it from its caller, of the first function from
-- `level` up that is the user's: frames of moonwire's own Lua (chunks named
-- "@moonwire/...") and C functions are passed over, so that misuse is blamed
-- on the user's line even when it is found a few calls deep in here.
local function user_level(level)
  while true do
    local info = debug.getinfo(level + 1, "S")
    if not info then return level end
    if info.what ~= "C" and info.source:sub(1, 10) ~= "@moonwire/" then return level end
    level = level + 1
  end
end

local function bad_argument(n, fname, expected, value)
  error(("bad argument #%d to '%s' (%s expected, got %s)"):format(n, fname, expected, type(value)), user_level(3))
end

local function running_coroutine(fname)
  local co, main = coroutine.running()
  if main then
    error(fname .. ": only inside a coroutine (the main chunk, mw.spawn or a test body);"
      .. " a callback cannot wait, start a coroutine with mw.spawn", user_level(2))
  end
  return co
end

function mw.spawn(fn, ...)
  if type(fn) ~= "function" then bad_argument(1, "mw.spawn", "function", fn) end
  local co = coroutine.create(fn)
  session_of[co] = session_of[coroutine.running()]
  resume(co, ...)
  return co
end

function mw.sleep(seconds)
  if type(seconds) ~= "number" then bad_argument(1, "mw.sleep", "number", seconds) end
  local co = running_coroutine("mw.sleep")
  host.after(seconds, function() resume(co) end)
  waiting_in[co] = "mw.sleep"
  resumed(co, coroutine.yield())
end

mw.after = host.after
mw.every = host.every
mw.now = host.now
-- virtual time: true when the clock is virtual (moonwire test --virtual-time)
mw.virtual_time = host.virtual_time
mw.exit = host.exit
mw.limits = host.limits
mw.hex = host.hex
mw.unhex = host.unhex
mw.base64 = host.base64
mw.unbase64 = host.unbase64

-- codec = "json": mw.json in native code, which Swift runs on the message's bytes
-- (decode) and into the outbound frame (encode); `native` tells the prelude to
-- leave both to Swift. Its decode is for heartbeat replies, which arrive as strings.
local json_codec

-- A copy of `opts` without its codec, which stays on this side, and the codec.
-- codec = "json" stays in the copy too: Swift decodes and encodes for it.
local function without_codec(opts, fname)
  local copy = {}
  for k, v in pairs(opts) do copy[k] = v end
  local codec = copy.codec
  copy.codec = nil
  if codec == "json" then
    json_codec = json_codec or { encode = mw.json.encode, decode = mw.json.decode, native = true }
    copy.codec = "json"
    return copy, json_codec
  end
  if codec ~= nil and (type(codec) ~= "table" or (codec.encode ~= nil and type(codec.encode) ~= "function")
      or (codec.decode ~= nil and type(codec.decode) ~= "function")) then
    error(("bad argument #2 to '%s' (opts.codec: \"json\" or { encode = function, decode = function } expected)"):format(fname), user_level(3))
  end
  return copy, codec
end

-- Handler lists, waiters and inboxes start as this one shared empty table and
-- get their own on the first append: most connections never use most of them,
-- and seven empty tables would cost half a kilobyte per connection. Never
-- write into NONE; go through append.
local NONE = {}
local function append(st, key, value)
  local list = st[key]
  if list == NONE then
    list = {}
    st[key] = list
  end
  list[#list + 1] = value
end

-- The Lua-side state of a connection or server, for its methods: a lookup in
-- `registry` that names `expected` when self is something else.
local function state_lookup(registry, expected)
  return function(obj, fname)
    local st = registry[obj]
    if not st then
      error(("bad self to '%s' (%s expected, got %s)"):format(fname, expected, type(obj)), user_level(3))
    end
    return st
  end
end

-- Adds on_<event>(fn) methods that append fn to the object's handler list.
local function define_handlers(target, prefix, events, lookup)
  for _, event in ipairs(events) do
    local key, fname = "on_" .. event, prefix .. ":on_" .. event
    target[key] = function(self, fn)
      local st = lookup(self, fname)
      if type(fn) ~= "function" then bad_argument(1, fname, "function", fn) end
      append(st, key, fn)
      return self
    end
  end
end

-- Connections ---------------------------------------------------------------
--
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
local methods = host.connection_methods

local state_of = state_lookup(conns, "a connection from mw.connect")

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
-- function) and kind stay on this side; Swift is told only that they exist.
-- `where` names the table in errors ("opts.heartbeat" for mw.connect).
local KINDS = { text = true, binary = true }
local function split_heartbeat(hb, fname, argn, where)
  if type(hb) ~= "table" then return hb end
  local function bad(key, what)
    error(("bad argument #%d to '%s' (%s.%s: %s)"):format(argn, fname, where, key, what), user_level(2))
  end
  local copy = {}
  for k, v in pairs(hb) do copy[k] = v end
  local message, reply, kind = hb.message, hb.reply, hb.kind
  if message ~= nil then
    if type(message) ~= "string" and type(message) ~= "function" then
      bad("message", "string or function expected, got " .. type(message))
    end
    copy.message = true
  end
  if reply ~= nil then
    if type(reply) == "string" then
      local err = pattern_error(reply)
      if err then bad("reply", "bad Lua pattern " .. ("%q"):format(reply) .. ": " .. err) end
    elseif type(reply) ~= "function" then
      bad("reply", "Lua pattern or function expected, got " .. type(reply))
    end
    copy.reply = true
  end
  if kind ~= nil then
    if not KINDS[kind] then bad("kind", '"text" or "binary" expected, got ' .. (type(kind) == "string" and ("%q"):format(kind) or type(kind))) end
    copy.kind = nil
  end
  return copy, message, reply, kind
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
      -- With codec = "json" only the decoded value reaches Lua: no bytes to compare.
      bad(where .. ".match", 'with codec = "json" a string match needs a string reply '
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

-- opts.kind: what c:send uses without a kind; nil is "auto".
local function split_kind(opts, fname)
  local kind = opts.kind
  if kind == nil or kind == "auto" then return nil end
  if not KINDS[kind] then
    error(("bad argument #2 to '%s' (opts.kind: \"auto\", \"text\" or \"binary\" expected, got %s)")
      :format(fname, type(kind) == "string" and ("%q"):format(kind) or type(kind)), user_level(3))
  end
  return kind
end

function mw.connect(url, opts)
  if type(url) ~= "string" then bad_argument(1, "mw.connect", "string", url) end
  if opts ~= nil and type(opts) ~= "table" then bad_argument(2, "mw.connect", "table", opts) end
  local codec, hb_message, hb_reply, hb_kind, framer, kind, auto_rules
  if opts then
    local copy
    copy, codec = without_codec(opts, "mw.connect")
    auto_rules = split_auto_reply(copy, "mw.connect", codec)
    copy.heartbeat, hb_message, hb_reply, hb_kind = split_heartbeat(copy.heartbeat, "mw.connect", 2, "opts.heartbeat")
    kind = split_kind(copy, "mw.connect")
    copy.kind = nil
    if type(copy.framing) == "function" then
      framer, copy.framing = copy.framing, "custom"
    end
    opts = copy
  end
  local c = host.connect(url, opts)
  conns[c] = { codec = codec, on_open = NONE, on_message = NONE, on_close = NONE, on_error = NONE,
               on_reconnect = NONE, on_drain = NONE, on_ready = NONE, waiters = NONE, inbox = NONE, final = false,
               hb_message = hb_message, hb_reply = hb_reply, framer = framer, kind = kind, hb_kind = hb_kind,
               auto_rules = auto_rules }
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
end

define_handlers(methods, "c", { "open", "message", "close", "error", "reconnect", "drain", "ready" }, state_of)

-- c:reconnect() brings a closed connection back: receive and wait_open wait again.
local raw_reconnect = methods.reconnect
function methods.reconnect(self, ...)
  local st = state_of(self, "c:reconnect")
  raw_reconnect(self, ...)
  if select("#", ...) == 0 then st.final = false end
end

-- `data` through the connection's codec, if it encodes; errors at the caller of `fname`.
local function encode_message(st, data, fname)
  local codec = st.codec
  if codec and codec.encode and not codec.native then
    data = codec.encode(data)
    if type(data) ~= "string" then
      error(fname .. ": the codec's encode returned a " .. type(data) .. ", not a string", user_level(2))
    end
  end
  return data
end

local raw_send = methods.send
function methods.send(self, data, kind)
  local st = state_of(self, "c:send")
  return raw_send(self, encode_message(st, data, "c:send"), kind or st.kind)
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
  if timeout then
    waiter.timer = host.after(timeout, function()
      for i, w in ipairs(st.waiters) do
        if w == waiter then
          table.remove(st.waiters, i)
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

-- The match of c:request and c:expect: a function(msg) -> truthy, a Lua
-- pattern (for string messages), or a table that must be a subset of the
-- decoded message.
local function matcher(match, argn, fname)
  local t = type(match)
  if t == "function" then return match end
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

-- The inbox: a queue with head and tail indexes (table.remove(t, 1) would move
-- every message each time).
local function inbox_push(st, item)
  local q = st.inbox
  if q == NONE then
    q = { head = 1, tail = 0 }
    st.inbox = q
  end
  q.tail = q.tail + 1
  q[q.tail] = item
  return q.tail - q.head + 1
end

local raw_pause_reading = methods._pause_reading
methods._pause_reading = nil

-- Reading resumes once the script took half of what paused it.
local function inbox_taken(self, st, q)
  if st.paused and q.tail - q.head + 1 <= INBOX_LIMIT // 2 then
    st.paused = false
    raw_pause_reading(self, false)
  end
end

local function inbox_pop(self, st)
  local q = st.inbox
  if q == NONE or q.head > q.tail then return nil end
  local item = q[q.head]
  q[q.head] = nil
  q.head = q.head + 1
  inbox_taken(self, st, q)
  return item
end

-- The first message in the inbox that `match` accepts, taken out of it.
local function inbox_take(self, st, match)
  local q = st.inbox
  if q == NONE then return nil end
  for i = q.head, q.tail do
    local item = q[i]
    if not item.failed and match(item[1]) then
      table.move(q, i + 1, q.tail, i)
      q[q.tail] = nil
      q.tail = q.tail - 1
      inbox_taken(self, st, q)
      return item
    end
  end
end

function methods.receive(self, timeout)
  local st = state_of(self, "c:receive")
  check_timeout("c:receive", timeout)
  local first = inbox_pop(self, st)
  if first then return first[1], first[2] end
  if st.final then return nil, "closed" end
  return wait(st, "c:receive", "receive", timeout)
end

-- Waits until the connection can take more: at once when its send budget was
-- not reached, else until buffered fell under half of it (on_drain).
local over_budget = methods._over_budget
methods._over_budget = nil
function methods.drain(self, timeout)
  local st = state_of(self, "c:drain")
  if not over_budget(self) then return true end
  if st.final then return nil, "closed" end
  return wait(st, "c:drain", "drain", timeout)
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

function methods.request(self, message, match, timeout)
  local st = state_of(self, "c:request")
  match = matcher(match, 2, "c:request")
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
  match = matcher(match, 1, "c:expect")
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
end

local events = {}

function events.open(c, info)
  local st = conns[c]
  if not st then return end
  for _, handler in ipairs(st.on_open) do handler(c, info) end
  wake(st, is_kind("open"), true)
end

-- A message the codec could not decode: the script hears of it in words, with the
-- raw message (on_error handlers get it as a third argument; without a handler it
-- is logged); a waiting c:receive returns nil, "decode: ..." (else the next one
-- does); request, expect and on_message do not see it.
local function decode_failed(c, st, err, raw)
  local text = "decode: " .. tostring(err)
  if st.on_error[1] then
    for _, handler in ipairs(st.on_error) do handler(c, text, raw) end
  else
    local shown = #raw > 200 and raw:sub(1, 200) .. "..." or raw
    host.log("warn", ("connection: %s; the message (%d bytes): %q"):format(text, #raw, shown))
  end
  local taken = st.waiters[1] and wake(st, is_kind("receive"), nil, text)
  if not taken and not st.on_message[1] then inbox_push(st, { nil, text, failed = true }) end
end

-- A message with codec = "json" comes decoded from Swift, or with the decode error
-- and the raw message.
function events.message(c, message, kind, err, raw)
  local st = conns[c]
  if not st then return end
  local codec = st.codec
  if err ~= nil then return decode_failed(c, st, err, raw) end
  if st.decoded_raw ~= nil then
    -- Decoded already, to match it against heartbeat.reply.
    if codec.native then
      st.decoded_raw, st.decoded = nil, nil
    else
      raw = message
      if st.decoded_raw == message then message = st.decoded else message, err = codec.decode(message, kind) end
      st.decoded_raw, st.decoded = nil, nil
      if message == nil and err ~= nil then return decode_failed(c, st, err, raw) end
    end
  elseif codec and codec.decode and not codec.native then
    raw = message
    message, err = codec.decode(message, kind)
    if message == nil and err ~= nil then return decode_failed(c, st, err, raw) end
  end
  local rules = st.auto_rules
  if rules and auto_answer(rules, c, encode_message, st, raw or message, message, kind) then
    return
  end
  if st.waiters[1] then
    local received = false
    local taken = wake(st, function(w)
      if w.match then return w.match(message) and true or false end
      if w.kind == "receive" and not received then
        received = true
        return true
      end
      return false
    end, message, kind)
    if taken then return end
  end
  local handlers = st.on_message
  if handlers[1] then
    for i = 1, #handlers do handlers[i](c, message, kind) end
  elseif inbox_push(st, { message, kind }) >= INBOX_LIMIT and not st.paused then
    st.paused = true
    raw_pause_reading(c, true)
  end
end

-- The send budget: on_drain handlers, then the coroutines waiting in drain().
function events.drain(c)
  local st = conns[c]
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
    st.decoded_raw, st.decoded = nil, nil
    return true
  end
  return false
end

-- Servers -------------------------------------------------------------------

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

local function encode_for(st, data, fname)
  local codec = st and st.codec
  if codec and codec.encode and not codec.native then
    data = codec.encode(data)
    if type(data) ~= "string" then
      error(fname .. ": the codec's encode returned a " .. type(data) .. ", not a string", user_level(3))
    end
  end
  return data
end

local raw_broadcast = server_methods.broadcast
function server_methods.broadcast(self, data, kind)
  local st = server_state(self, "s:broadcast")
  return raw_broadcast(self, encode_for(st, data, "s:broadcast"), kind)
end

local raw_peer_send = peer_methods.send
function peer_methods.send(self, data, kind)
  return raw_peer_send(self, encode_for(servers[server_of_peer[self]], data, "peer:send"), kind)
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
    local shown = #raw > 200 and raw:sub(1, 200) .. "..." or raw
    host.log("warn", ("peer %s: decode: %s; the message (%d bytes): %q"):format(tostring(peer.id), tostring(err), #raw, shown))
    return
  end
  local rules = st.auto_rules
  if rules and auto_answer(rules, peer, encode_for, st, raw or message, message, kind) then
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

local inspect = host.inspect_module()
mw.inspect = inspect.inspect
inspect_value = inspect.inspect
-- The C message handler prints an error value that is not a string with this,
-- not as "(error object is a table value)".
debug.getregistry()["moonwire.describe_error"] = function(value) return describe(value) end
mw.hexdump = inspect.hexdump

-- One log line from any values: a format string with % directives and its
-- arguments go through string.format; otherwise the values are joined by
-- spaces, strings as they are, tables through mw.inspect.
local function log_text(name, n, first, ...)
  if type(first) == "string" and n > 1 and first:find("%%[^%%]") then
    local ok, message = pcall(string.format, first, ...)
    if not ok then error(name .. ": " .. message, 3) end
    return message
  end
  local parts = { first, ... }
  for i = 1, n do
    local v = parts[i]
    if type(v) == "table" then parts[i] = inspect.inspect(v) else parts[i] = tostring(v) end
  end
  return table.concat(parts, " ", 1, n)
end

local function logger(level)
  local name = "mw.log." .. level
  return function(...)
    host.log(level, log_text(name, select("#", ...), ...))
  end
end

-- mw.log(...) logs at info; mw.log.debug/info/warn/error(...) at that level.
mw.log = setmetatable({
  debug = logger("debug"),
  info = logger("info"),
  warn = logger("warn"),
  error = logger("error"),
}, {
  __call = function(_, ...) host.log("info", log_text("mw.log", select("#", ...), ...)) end,
})

-- JSON that keeps integers exact and arrays apart from objects (json.lua says
-- why not lua-cjson).
mw.json = host.json_native(host.json_module())

-- Lua's own print writes each argument, the tabs and the newline separately;
-- workers (run --workers) share the process's stdout, so their lines could mix
-- mid-line. This one renders the line the same way and writes it in one piece.
local tostring, select, concat, write_line = tostring, select, table.concat, host.write_line
function print(...)
  local n = select("#", ...)
  local parts = { ... }
  for i = 1, n do parts[i] = tostring(parts[i]) end
  write_line(concat(parts, "\t", 1, n))
end

-- Metrics -------------------------------------------------------------------
--
-- A metric is a table holding its index in the runtime's registry; recording
-- a value is one call into Swift with that index. Names and tags follow the
-- Prometheus rules (checked in Swift).

local metric_register, metric_add, metric_set, metric_change, metric_observe =
  host.metric_register, host.metric_add, host.metric_set, host.metric_change, host.metric_observe
local now = host.now

local counter_methods = {}
counter_methods.__index = counter_methods
function counter_methods:add(n) metric_add(self.id, n) end
counter_methods.inc = counter_methods.add

local gauge_methods = {}
gauge_methods.__index = gauge_methods
function gauge_methods:set(v) metric_set(self.id, v) end
function gauge_methods:add(d) metric_change(self.id, d) end
function gauge_methods:inc() metric_change(self.id, 1) end
function gauge_methods:dec() metric_change(self.id, -1) end

local timing_methods = {}
timing_methods.__index = timing_methods
-- Records the seconds since start() and returns them.
function timing_methods:stop()
  local seconds = now() - self.started
  metric_observe(self.id, seconds)
  return seconds
end

local histogram_methods = {}
histogram_methods.__index = histogram_methods
function histogram_methods:observe(v) metric_observe(self.id, v) end
function histogram_methods:start() return setmetatable({ id = self.id, started = now() }, timing_methods) end

-- mw.metrics.<fname>(name [, tags]): a metric of `kind` with `methods`.
local function metric_constructor(fname, kind, methods)
  fname = "mw.metrics." .. fname
  return function(name, tags)
    if type(name) ~= "string" then bad_argument(1, fname, "string", name) end
    if tags ~= nil and type(tags) ~= "table" then bad_argument(2, fname, "table", tags) end
    return setmetatable({ id = metric_register(kind, name, tags), name = name }, methods)
  end
end

mw.metrics = {
  counter = metric_constructor("counter", "counter", counter_methods),
  gauge = metric_constructor("gauge", "gauge", gauge_methods),
  histogram = metric_constructor("histogram", "histogram", histogram_methods),
  -- A timer is a histogram of seconds: local t = m:start() ... t:stop().
  timer = metric_constructor("timer", "histogram", histogram_methods),
}

-- { ["metric:stat"] = "< 0.05" | { "< 0.05", "> 0" }, ... }
function mw.thresholds(list)
  if type(list) ~= "table" then bad_argument(1, "mw.thresholds", "table", list) end
  for key, conditions in pairs(list) do
    if type(key) ~= "string" then error("mw.thresholds: keys are 'metric:statistic' strings", 2) end
    if type(conditions) ~= "table" then conditions = { conditions } end
    for _, condition in ipairs(conditions) do
      if type(condition) ~= "string" then
        error(("mw.thresholds: '%s': a condition such as '< 0.05' expected, got %s"):format(key, type(condition)), 2)
      end
      host.threshold(key, condition)
    end
  end
end

-- Load models ----------------------------------------------------------------

local shard, shards = host.shard_index, host.shard_count
mw.shard = { index = shard, count = shards }

local function check_number(fname, key, value, min)
  if type(value) ~= "number" or value < min then
    error(("%s: %s: a number of at least %s expected, got %s"):format(fname, key, min, tostring(value)), 3)
  end
end

-- A coroutine running body(...), then after_run(), whether body returned or
-- raised; an error is then reported as uncaught, with body's traceback.
local function run_guarded(body, after_run)
  return coroutine.create(function(...)
    local ok, err = xpcall(body, debug.traceback, ...)
    after_run()
    if not ok then
      if err == EXIT then error(EXIT, 0) end
      host.uncaught(describe(err, false))
    end
  end)
end

-- The running coroutine, or nil on the main stack (a callback): mw.rate and
-- mw.vus wait for their calls to end only where waiting is possible.
local function waiter_for()
  local co, main = coroutine.running()
  if not main then return co end
end

local PENDING_LIMIT = 100000

-- Open model: fn(n) starts at a fixed arrival schedule, however long earlier
-- calls take; n numbers the starts of the whole schedule (all shards) from 1. Latency counts from the intended start; a start that finds
-- max_in_flight calls running is counted in missed_starts and, once a call
-- ends, recorded at the time it waited (coordinated omission corrected).
function mw.rate(opts)
  if type(opts) ~= "table" then bad_argument(1, "mw.rate", "table", opts) end
  local fn = opts.fn
  if type(fn) ~= "function" then error("mw.rate: fn: function expected, got " .. type(fn), 2) end
  local stages = opts.stages
  if stages == nil then
    stages = { { rate = opts.rate, duration = opts.duration } }
  elseif type(stages) ~= "table" or #stages == 0 then
    error("mw.rate: stages: a list of { rate =, duration = } expected", 2)
  end
  for _, st in ipairs(stages) do
    check_number("mw.rate", "rate", st.rate, 0)
    check_number("mw.rate", "duration", st.duration, 0)
  end
  local max_in_flight = opts.max_in_flight or 1000
  if math.type(max_in_flight) ~= "integer" or max_in_flight < 1 then
    error("mw.rate: max_in_flight: an integer of at least 1 expected", 2)
  end
  local tags = opts.name and { scenario = tostring(opts.name) } or nil
  local iterations = metric_register("counter", "iterations", tags)
  local missed = metric_register("counter", "missed_starts", tags)
  local latency = metric_register("histogram", "iteration_duration", tags)
  local raw = metric_register("histogram", "iteration_duration_uncorrected", tags)
  local in_flight_gauge = metric_register("gauge", "in_flight", tags)

  local waiting = waiter_for()
  local started_at = now()
  local stage_index, stage_base, in_stage, sequence = 1, started_at, 0, 0
  -- The intended time of this shard's next start: the global schedule's
  -- starts numbered i with i % shards == shard - 1, so the shards together
  -- start exactly what one process would.
  local function next_start()
    while true do
      local st = stages[stage_index]
      if not st then return nil end
      local n = math.floor(st.rate * st.duration + 1e-9)
      if in_stage < n then
        local t = stage_base + in_stage / st.rate
        in_stage = in_stage + 1
        sequence = sequence + 1
        if (sequence - 1) % shards == shard - 1 then return t, sequence end
      else
        stage_base, stage_index, in_stage = stage_base + st.duration, stage_index + 1, 0
      end
    end
  end

  local in_flight, started, missed_count, pending, done = 0, 0, 0, {}, false
  local function maybe_wake()
    if done and in_flight == 0 and waiting then
      local co = waiting
      waiting = nil
      resume(co)
    end
  end
  local function start(intended, number)
    if in_flight >= max_in_flight then
      metric_add(missed, 1)
      missed_count = missed_count + 1
      if #pending < PENDING_LIMIT then pending[#pending + 1] = intended end
      return
    end
    in_flight = in_flight + 1
    started = started + 1
    metric_add(iterations, 1)
    metric_set(in_flight_gauge, in_flight)
    local actual = now()
    local co = run_guarded(fn, function()
      local t = now()
      metric_observe(latency, t - intended)
      metric_observe(raw, t - actual)
      if pending[1] then
        for i = 1, #pending do metric_observe(latency, t - pending[i]) end
        pending = {}
      end
      in_flight = in_flight - 1
      metric_set(in_flight_gauge, in_flight)
      maybe_wake()
    end)
    intended_start[co] = intended
    resume(co, number)
  end

  local upcoming, number = next_start()
  local function tick()
    local t = now()
    while upcoming and upcoming <= t do
      start(upcoming, number)
      upcoming, number = next_start()
    end
    if upcoming then
      host.after(upcoming - t, tick)
    else
      done = true
      maybe_wake()
    end
  end
  tick()
  if waiting and not (done and in_flight == 0) then coroutine.yield() end
  waiting = nil
  return { started = started, missed = missed_count }
end

-- Closes the connections a session opened that are still open or on their way
-- to be (1000, "session ended"); returns how many.
local close_connection = methods.close
local function end_session(session)
  local closed = 0
  for c in pairs(session.conns) do
    local state = raw_state(c)
    if state ~= "closed" and state ~= "closing" then
      close_connection(c, 1000, "session ended")
      closed = closed + 1
    end
  end
  return closed
end

-- Closed model: count long-lived sessions (this shard's part of them),
-- started evenly over ramp seconds. Each calls fn(vu) once, or, with
-- duration or iterations, again and again, vu (a table with id and
-- iteration) kept across the calls. A session ends after its last call, and
-- what it opened (mw.connect in fn or in coroutines it spawned) is closed then,
-- so that the run ends. Returns { started =, iterations =, closed = }: from a
-- callback at once, the figures filling in as the sessions run.
function mw.vus(opts)
  if type(opts) ~= "table" then bad_argument(1, "mw.vus", "table", opts) end
  local fn = opts.fn
  if type(fn) ~= "function" then error("mw.vus: fn: function expected, got " .. type(fn), 2) end
  if math.type(opts.count) ~= "integer" or opts.count < 0 then
    error("mw.vus: count: an integer of at least 0 expected, got " .. tostring(opts.count), 2)
  end
  local ramp, duration, max_iterations = opts.ramp or 0, opts.duration, opts.iterations
  check_number("mw.vus", "ramp", ramp, 0)
  if duration ~= nil then check_number("mw.vus", "duration", duration, 0) end
  if max_iterations ~= nil and (math.type(max_iterations) ~= "integer" or max_iterations < 1) then
    error("mw.vus: iterations: an integer of at least 1 expected", 2)
  end
  local tags = opts.name and { scenario = tostring(opts.name) } or nil
  local active = metric_register("gauge", "vus_active", tags)
  local iterations = metric_register("counter", "iterations", tags)
  local latency = metric_register("histogram", "iteration_duration", tags)
  local count = opts.count
  local waiting = waiter_for()
  local started_at = now()
  local mine, running = 0, 0
  local result = { started = 0, iterations = 0, closed = 0 }
  local function maybe_wake()
    if running == 0 and mine == 0 and waiting then
      local co = waiting
      waiting = nil
      resume(co)
    end
  end
  local function session(vu)
    repeat
      vu.iteration = vu.iteration + 1
      result.iterations = result.iterations + 1
      metric_add(iterations, 1)
      local t = now()
      fn(vu)
      metric_observe(latency, now() - t)
    until (duration == nil and max_iterations == nil)
      or (max_iterations and vu.iteration >= max_iterations)
      or (duration and now() - started_at >= duration)
  end
  for id = 1, count do
    if (id - 1) % shards == shard - 1 then
      mine = mine + 1
      host.after(ramp * (id - 1) / count, function()
        mine = mine - 1
        running = running + 1
        result.started = result.started + 1
        metric_change(active, 1)
        local own = { conns = setmetatable({}, { __mode = "k" }) }
        local co = run_guarded(session, function()
          running = running - 1
          metric_change(active, -1)
          result.closed = result.closed + end_session(own)
          maybe_wake()
        end)
        session_of[co] = own
        resume(co, { id = id, iteration = 0 })
      end)
    end
  end
  if waiting and mine + running > 0 then coroutine.yield() end
  waiting = nil
  return result
end

package.loaded.moonwire = mw
mw._VERSION = host.version
mw.worker = host.worker
mw.workers = host.workers
_G.mw = mw

-- Runs a script's main chunk as a coroutine, so that it can wait (mw.sleep,
-- c:receive) from its top level.
local function start(main, script, ...)
  mw.args = { ... }
  arg = { [-1] = "moonwire", [0] = script, ... }
  resume(coroutine.create(main), ...)
end

-- For the test runner: what it needs of the machinery above.
local internal = {
  events = events,
  server_events = server_events,
  resume = resume,
  after = host.after,
  abandon = function(co) abandoned[co] = true end,
  waiting_in = function(co) return waiting_in[co] end,
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
