-- Load models: mw.rate (open: arrivals on a schedule) and mw.vus (closed:
-- long-lived sessions), split between the shards of a run.

local host, prelude = ...
local mw, EXIT, describe, bad_argument, resume = prelude.mw, prelude.EXIT, prelude.describe, prelude.bad_argument, prelude.resume
local session_of, intended_start = prelude.session_of, prelude.intended_start
local methods, raw_state = prelude.connection_methods, prelude.raw_state
local metric_register, metric_add, metric_set, metric_change, metric_observe =
  host.metric_register, host.metric_add, host.metric_set, host.metric_change, host.metric_observe
local now, load_start, load_began = host.now, host.load_start, host.load_began
-- As glue.lua's print holds it: a script that replaces the global changes no message here.
local tostring = tostring

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
  -- Now, or run --start-at's instant while it is ahead: the first tick waits for it.
  local started_at = load_start()
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
  local began = false
  local function start(intended, number)
    if not began then
      -- When the schedule actually began: this start's time less its place in it.
      began = true
      load_began(intended - started_at)
    end
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
    -- One Lua has finalized (it ended and nothing held it) stays in this weak set
    -- until the next collection, and has nothing left to close.
    local alive, state = pcall(raw_state, c)
    if alive and state ~= "closed" and state ~= "closing" then
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
  local started_at = load_start()
  local delay = math.max(0, started_at - now())
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
      local offset = ramp * (id - 1) / count
      host.after(delay + offset, function()
        load_began(offset)
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
