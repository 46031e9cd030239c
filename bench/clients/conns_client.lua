-- conns_client.lua: COUNT idle WebSocket connections, each with its own
-- heartbeat, held open for HOLD seconds: what one connection costs in memory
-- and what keeping many alive costs in CPU (the `conns` section of bench/run.sh).
--   moonwire run bench/clients/conns_client.lua URL COUNT INTERVAL HOLD [CONCURRENCY]
-- At most CONCURRENCY (default 200) handshakes are in flight. Prints, a line each:
--   BASE_RSS_KB <kb>                              before the first dial
--   OPEN <opened> <seconds>                       progress, every tenth of COUNT
--   ALL_OPEN <opened> <failed> <seconds> <rss_kb> when every dial has ended
--   one JSON line after the hold: how many are still open, how many closed meanwhile
local url = mw.args[1]
local count = math.tointeger(tonumber(mw.args[2] or ""))
local interval, hold = tonumber(mw.args[3] or ""), tonumber(mw.args[4] or "")
local concurrency = math.tointeger(tonumber(mw.args[5] or "200"))
if not (url and count and interval and hold and concurrency) then
  error("usage: conns_client.lua URL COUNT INTERVAL HOLD [CONCURRENCY]", 0)
end

local function rss_kb()
  local f = assert(io.open("/proc/self/status"))
  local status = f:read("a")
  f:close()
  return math.tointeger(tonumber(status:match("VmRSS:%s*(%d+)")))
end

local function say(...)
  io.stdout:write(table.concat({ ... }, " "), "\n")
  io.stdout:flush()
end

local options = {
  heartbeat = { interval = interval, timeout = interval },
  reconnect = false,
  connect_timeout = 60,
}
local conns, opened, failed, closed, next_index, dialing = {}, 0, 0, 0, 1, 0
local step = math.max(1, count // 10)
local start

local function on_close() closed = closed + 1 end

local function dialer()
  while next_index <= count do
    next_index = next_index + 1
    local c = mw.connect(url, options)
    local ok, err = c:wait_open(60)
    if ok then
      opened = opened + 1
      conns[#conns + 1] = c
      c:on_close(on_close)
      if opened % step == 0 then say("OPEN", opened, ("%.3f"):format(mw.now() - start)) end
    else
      failed = failed + 1
      if failed <= 5 then io.stderr:write("connect failed: ", tostring(err), "\n") end
      c:close()
    end
  end
  dialing = dialing - 1
end

collectgarbage("collect")
say("BASE_RSS_KB", rss_kb())
start = mw.now()
dialing = math.min(concurrency, count)
for _ = 1, dialing do mw.spawn(dialer) end
while dialing > 0 do mw.sleep(0.01) end
local connect_s = mw.now() - start
collectgarbage("collect")
say("ALL_OPEN", opened, failed, ("%.3f"):format(connect_s), rss_kb())

mw.sleep(hold)
local still_open, max_rtt = 0, 0
for _, c in ipairs(conns) do
  if c:state() == "open" then still_open = still_open + 1 end
  max_rtt = math.max(max_rtt, c:stats().last_rtt or 0)
end
say(mw.json.encode {
  ok = failed == 0 and still_open == count, conns = count, opened = opened, failed = failed,
  connect_s = connect_s, still_open = still_open, closed_during_hold = closed,
  max_last_rtt_ms = max_rtt * 1e3, rss_kb = rss_kb(), heartbeat_interval = interval, hold_s = hold,
})
mw.exit(0)
