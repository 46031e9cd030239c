-- Metrics (mw.metrics, mw.thresholds).
--
-- A metric is a table holding its index in the runtime's registry; recording
-- a value is one call into Swift with that index. Names and tags follow the
-- Prometheus rules (checked in Swift).

local host, prelude = ...
local mw, bad_argument = prelude.mw, prelude.bad_argument

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
