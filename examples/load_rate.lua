-- load_rate.lua: open-model load with metrics and thresholds. Requests start
-- at a fixed rate, however slow the answers are (mw.rate); latency counts from
-- when each request was meant to start, so a stalled server shows in the
-- figures instead of hiding them (coordinated omission corrected). With no URL
-- (or "-") it starts an echo server of its own that answers after DELAY seconds.
-- It also prints how long each step of the dial took (c:stats().connect).
-- STALL (seconds) makes its own server hold every answer that long once, half
-- way through: what a stalled server looks like in the figures and the report.
--   moonwire run --summary examples/load_rate.lua [URL [RATE [DURATION [DELAY [STALL]]]]]
--   moonwire run --shard 2/4 --summary-json part2.json examples/load_rate.lua
--   moonwire run --shard 2/4 --start-at 2026-11-26T22:00:00Z --summary-json results/ examples/load_rate.lua URL
--     (each shard's load begins at that instant; then moonwire metrics merge results/: docs/scaling.md)
--   moonwire run --report report.html examples/load_rate.lua - 50 20 0.01 2
local url = mw.args[1] ~= "-" and mw.args[1] or nil
local rate = tonumber(mw.args[2]) or 50
local duration = tonumber(mw.args[3]) or 2
local delay = tonumber(mw.args[4]) or 0.01
local stall = tonumber(mw.args[5]) or 0

mw.thresholds {
  ["request_latency:p99"] = "< 0.5",
  ["missed_starts:count"] = "== 0",
  ["dropped:count"] = "== 0",
}

local server
if not url then
  server = assert(mw.listen("ws://127.0.0.1:0/echo"))
  local stall_at = mw.now() + duration / 2
  server:on_message(function(peer, msg, kind)
    local wait = delay
    if stall > 0 and mw.now() >= stall_at then
      -- Everything that arrives during the stall is answered at its end.
      wait = math.max(delay, stall_at + stall - mw.now())
      if wait <= delay then stall = 0 end
    end
    mw.after(wait, function() peer:send(msg, kind) end)
  end)
  url = server:url()
end

local c = mw.connect(url)
assert(c:wait_open(5))
local steps = c:stats().connect
local parts = {}
for _, step in ipairs { "dns", "tcp", "tls", "handshake" } do
  if steps[step] then parts[#parts + 1] = ("%s %.2f ms"):format(step, steps[step] * 1000) end
end
print(("connected in %.2f ms: %s"):format(steps.total * 1000, table.concat(parts, ", ")))

local answered = mw.metrics.counter("answers", { kind = "echo" })
local result = mw.rate {
  rate = rate, duration = duration, max_in_flight = 100,
  fn = function(n)
    local id = "req-" .. n
    local reply = c:request(id, function(msg) return msg == id end, 5)
    if reply then answered:inc() end
  end,
}
print(("started %d, missed %d (shard %d/%d)"):format(result.started, result.missed, mw.shard.index, mw.shard.count))
c:close()
if server then server:close() end
