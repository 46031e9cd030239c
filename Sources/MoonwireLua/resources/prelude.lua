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

local function describe(err)
  if type(err) == "string" then return err end
  local meta = getmetatable(err)
  if meta and meta.__tostring then return tostring(err) end
  return "(error object is a " .. type(err) .. " value)"
end

-- Coroutines a test runner gave up on (timed out): never resumed again.
local abandoned = setmetatable({}, { __mode = "k" })

local function resume(co, ...)
  if abandoned[co] then return end
  local ok, err = coroutine.resume(co, ...)
  if not ok then
    -- mw.exit unwinds every coroutine on its way out; pass it on.
    if err == EXIT then error(EXIT, 0) end
    host.uncaught(debug.traceback(co, describe(err)))
  end
end

local function bad_argument(n, fname, expected, value)
  error(("bad argument #%d to '%s' (%s expected, got %s)"):format(n, fname, expected, type(value)), 3)
end

local function running_coroutine(fname)
  local co, main = coroutine.running()
  if main then
    error(fname .. ": only inside a coroutine (the main chunk, mw.spawn or a test body);"
      .. " a callback cannot wait, start a coroutine with mw.spawn", 3)
  end
  return co
end

function mw.spawn(fn, ...)
  if type(fn) ~= "function" then bad_argument(1, "mw.spawn", "function", fn) end
  local co = coroutine.create(fn)
  resume(co, ...)
  return co
end

function mw.sleep(seconds)
  if type(seconds) ~= "number" then bad_argument(1, "mw.sleep", "number", seconds) end
  local co = running_coroutine("mw.sleep")
  host.after(seconds, function() resume(co) end)
  coroutine.yield()
end

mw.after = host.after
mw.every = host.every
mw.now = host.now
mw.exit = host.exit
mw.hex = host.hex
mw.unhex = host.unhex
mw.base64 = host.base64
mw.unbase64 = host.unbase64

-- A copy of `opts` without its codec, which stays on this side, and the codec.
local function without_codec(opts, fname)
  local copy = {}
  for k, v in pairs(opts) do copy[k] = v end
  local codec = copy.codec
  copy.codec = nil
  if codec ~= nil and (type(codec) ~= "table" or (codec.encode ~= nil and type(codec.encode) ~= "function")
      or (codec.decode ~= nil and type(codec.decode) ~= "function")) then
    error(("bad argument #2 to '%s' (opts.codec: { encode = function, decode = function } expected)"):format(fname), 3)
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
      error(("bad self to '%s' (%s expected, got %s)"):format(fname, expected, type(obj)), 3)
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
-- first (at most INBOX_LIMIT messages, the oldest dropped).

local INBOX_LIMIT = 4096
local conns = setmetatable({}, { __mode = "k" })
local methods = host.connection_methods

local state_of = state_lookup(conns, "a connection from mw.connect")

-- The heartbeat's message (a string or a function) and reply pattern stay on
-- this side; Swift is told only that they exist.
local function split_heartbeat(hb, fname, argn)
  if type(hb) ~= "table" then return hb end
  local copy = {}
  for k, v in pairs(hb) do copy[k] = v end
  local message, reply = hb.message, hb.reply
  if message ~= nil then
    if type(message) ~= "string" and type(message) ~= "function" then
      error(("bad argument #%d to '%s' (heartbeat.message: string or function expected, got %s)")
        :format(argn, fname, type(message)), 3)
    end
    copy.message = true
  end
  if reply ~= nil then
    if type(reply) ~= "string" then
      error(("bad argument #%d to '%s' (heartbeat.reply: pattern expected, got %s)"):format(argn, fname, type(reply)), 3)
    end
    copy.reply = true
  end
  return copy, message, reply
end

function mw.connect(url, opts)
  if type(url) ~= "string" then bad_argument(1, "mw.connect", "string", url) end
  if opts ~= nil and type(opts) ~= "table" then bad_argument(2, "mw.connect", "table", opts) end
  local codec, hb_message, hb_reply, framer
  if opts then
    local copy
    copy, codec = without_codec(opts, "mw.connect")
    copy.heartbeat, hb_message, hb_reply = split_heartbeat(copy.heartbeat, "mw.connect", 2)
    if type(copy.framing) == "function" then
      framer, copy.framing = copy.framing, "custom"
    end
    opts = copy
  end
  local c = host.connect(url, opts)
  conns[c] = { codec = codec, on_open = NONE, on_message = NONE, on_close = NONE, on_error = NONE,
               on_reconnect = NONE, waiters = NONE, inbox = NONE, final = false, hb_message = hb_message, hb_reply = hb_reply,
               framer = framer }
  return c
end

local raw_heartbeat = methods.heartbeat
function methods.heartbeat(self, opts)
  local st = state_of(self, "c:heartbeat")
  local copy, message, reply = split_heartbeat(opts, "c:heartbeat", 1)
  raw_heartbeat(self, copy)
  st.hb_message, st.hb_reply = message, reply
end

define_handlers(methods, "c", { "open", "message", "close", "error", "reconnect" }, state_of)

local raw_send = methods.send
function methods.send(self, data, kind)
  local st = state_of(self, "c:send")
  local codec = st.codec
  if codec and codec.encode then
    data = codec.encode(data)
    if type(data) ~= "string" then
      error("c:send: the codec's encode returned a " .. type(data) .. ", not a string", 2)
    end
  end
  return raw_send(self, data, kind)
end

-- Suspends the running coroutine as a waiter of `kind` until woken, or until
-- `timeout` seconds passed (then returns nil, "timeout").
local function wait(st, fname, kind, timeout, match)
  if timeout ~= nil and (type(timeout) ~= "number" or timeout < 0) then
    error(("bad argument to '%s' (timeout: seconds expected, got %s)"):format(fname, type(timeout)), 3)
  end
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
  return coroutine.yield()
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
  return w.kind == "receive" or w.kind == "request"
end

function methods.receive(self, timeout)
  local st = state_of(self, "c:receive")
  local first = table.remove(st.inbox, 1)
  if first then return first[1], first[2] end
  if st.final then return nil, "closed" end
  return wait(st, "c:receive", "receive", timeout)
end

function methods.wait_open(self, timeout)
  local st = state_of(self, "c:wait_open")
  if self:state() == "open" then return true end
  if st.final then return nil, st.last_error or "closed" end
  return wait(st, "c:wait_open", "open", timeout)
end

-- Coroutines started by mw.rate, with the time they were meant to start: their
-- first request's latency counts from then (coordinated omission corrected).
local intended_start = setmetatable({}, { __mode = "k" })

function methods.request(self, message, match, timeout)
  local st = state_of(self, "c:request")
  if type(match) == "string" then
    local pattern = match
    match = function(reply) return type(reply) == "string" and reply:find(pattern) ~= nil end
  elseif type(match) ~= "function" then
    bad_argument(2, "c:request", "function or pattern", match)
  end
  running_coroutine("c:request")
  local co = coroutine.running()
  local started = intended_start[co] or host.now()
  intended_start[co] = nil
  local ok, err = self:send(message)
  if not ok then return nil, err end
  local reply, kind = wait(st, "c:request", "request", timeout, match)
  if reply ~= nil then host.metric_observe(host.request_latency, host.now() - started) end
  return reply, kind
end

local events = {}

function events.open(c, info)
  local st = conns[c]
  if not st then return end
  for _, handler in ipairs(st.on_open) do handler(c, info) end
  wake(st, is_kind("open"), true)
end

function events.message(c, message, kind)
  local st = conns[c]
  if not st then return end
  local codec = st.codec
  if codec and codec.decode then message = codec.decode(message, kind) end
  if st.waiters[1] then
    local received = false
    local taken = wake(st, function(w)
      if w.kind == "request" then return w.match(message) and true or false end
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
  else
    local inbox = st.inbox
    if #inbox >= INBOX_LIMIT then table.remove(inbox, 1) end
    append(st, "inbox", { message, kind })
  end
end

function events.close(c, code, reason, info)
  local st = conns[c]
  if not st then return end
  if not info.will_reconnect then st.final = true end
  for _, handler in ipairs(st.on_close) do handler(c, code, reason, info) end
  wake(st, is_data_waiter, nil, "closed")
  if st.final then wake(st, is_kind("open"), nil, st.last_error or "closed") end
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
  return message
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

function events.heartbeat_reply(c, message)
  local st = conns[c]
  return st ~= nil and st.hb_reply ~= nil and message:find(st.hb_reply) ~= nil
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
  local codec
  if opts then opts, codec = without_codec(opts, "mw.listen") end
  local s, err = host.listen(url, opts)
  if not s then return nil, err end
  servers[s] = { codec = codec, on_connect = {}, on_message = {}, on_close = {} }
  return s
end

define_handlers(server_methods, "s", { "connect", "message", "close" }, server_state)

local function encode_for(st, data, fname)
  local codec = st and st.codec
  if codec and codec.encode then
    data = codec.encode(data)
    if type(data) ~= "string" then
      error(fname .. ": the codec's encode returned a " .. type(data) .. ", not a string", 3)
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

local server_events = {}

function server_events.connect(s, peer, request)
  local st = servers[s]
  if not st then return end
  server_of_peer[peer] = s
  for _, handler in ipairs(st.on_connect) do handler(peer, request) end
end

function server_events.message(s, peer, message, kind)
  local st = servers[s]
  if not st then return end
  local codec = st.codec
  if codec and codec.decode then message = codec.decode(message, kind) end
  local handlers = st.on_message
  for i = 1, #handlers do handlers[i](peer, message, kind) end
end

function server_events.close(s, peer, code, reason)
  local st = servers[s]
  if not st then return end
  for _, handler in ipairs(st.on_close) do handler(peer, code, reason) end
end

local function logger(level)
  local name = "mw.log." .. level
  return function(fmt, ...)
    local ok, message = pcall(string.format, fmt, ...)
    if not ok then error(name .. ": " .. message, 2) end
    host.log(level, message)
  end
end

mw.log = {
  debug = logger("debug"),
  info = logger("info"),
  warn = logger("warn"),
  error = logger("error"),
}

-- A private cjson instance, so a script's own settings on require "cjson"
-- do not change how mw.json behaves.
local cjson = require("cjson").new()

mw.json = {
  null = cjson.null,
  encode = function(value)
    local ok, text = pcall(cjson.encode, value)
    if not ok then error("mw.json.encode: " .. text, 2) end
    return text
  end,
  -- Malformed JSON usually comes from the peer, so it is nil, err, not an error.
  decode = function(text)
    if type(text) ~= "string" then bad_argument(1, "mw.json.decode", "string", text) end
    local ok, value = pcall(cjson.decode, text)
    if ok then return value end
    return nil, value
  end,
}

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
      host.uncaught(describe(err))
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

-- Closed model: count long-lived sessions (this shard's part of them),
-- started evenly over ramp seconds. Each calls fn(vu) once, or, with
-- duration or iterations, again and again, vu (a table with id and
-- iteration) kept across the calls.
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
        metric_change(active, 1)
        resume(run_guarded(session, function()
          running = running - 1
          metric_change(active, -1)
          maybe_wake()
        end), { id = id, iteration = 0 })
      end)
    end
  end
  if waiting and mine + running > 0 then coroutine.yield() end
  waiting = nil
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
}

return mw, start, internal
