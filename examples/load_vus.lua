-- load_vus.lua: closed-model load. COUNT virtual users start over the first
-- quarter of DURATION seconds; each opens its own connection and sends one
-- request after another (with a little think time) until DURATION is up. Then
-- the connection each VU opened is closed (1000) and the run ends by itself;
-- mw.vus returns what it did. With no URL (or "-") it serves an echo of its own.
--   moonwire run --summary examples/load_vus.lua [URL [COUNT [DURATION]]]
local url = mw.args[1] ~= "-" and mw.args[1] or nil
local count = tonumber(mw.args[2]) or 10
local duration = tonumber(mw.args[3]) or 2

mw.thresholds {
  ["request_latency:p99"] = "< 0.5",
  ["errors:count"] = "== 0",
}

-- The echo server, when there is no URL: it stops once mw.vus is done and the
-- VUs' connections have left (closing it earlier would close them with 1001).
local stop_server
if not url then
  local server = assert(mw.listen("ws://127.0.0.1:0/echo"))
  local peers, done = 0, false
  server:on_message(function(peer, msg, kind) peer:send(msg, kind) end)
  server:on_connect(function() peers = peers + 1 end)
  server:on_close(function()
    peers = peers - 1
    if done and peers == 0 then server:close() end
  end)
  stop_server = function()
    done = true
    if peers == 0 then server:close() end
  end
  url = server:url()
end

local result = mw.vus {
  count = count, ramp = duration / 4, duration = duration,
  fn = function(vu)
    vu.conn = vu.conn or mw.connect(url) -- kept across this VU's iterations
    local id = ("vu%d-%d"):format(vu.id, vu.iteration)
    assert(vu.conn:request(id, function(msg) return msg == id end, 5))
    mw.sleep(0.05) -- think time
  end,
}
print(("%d VUs, %d iterations, %d connections closed when their VU ended"):format(
  result.started, result.iterations, result.closed))
if stop_server then stop_server() end
