-- heartbeat_conns.lua: N idle connections, each with a heartbeat every
-- INTERVAL seconds, held for SECONDS; prints how many stayed open.
--   moonwire run bench/heartbeat_conns.lua URL N INTERVAL SECONDS
local url, n, interval, seconds = mw.args[1], tonumber(mw.args[2]), tonumber(mw.args[3]), tonumber(mw.args[4])
local conns = {}
for i = 1, n do
  conns[i] = mw.connect(url, { heartbeat = { interval = interval, timeout = interval }, reconnect = false })
end
io.stdout:write("CONNECTING\n")
io.stdout:flush()
mw.after(seconds, function()
  local open, rtt = 0, 0
  for _, c in ipairs(conns) do
    if c:state() == "open" then open = open + 1 end
    rtt = math.max(rtt, c:stats().last_rtt or 0)
  end
  print(mw.json.encode({ connections = n, open = open, max_last_rtt_ms = rtt * 1e3 }))
  mw.exit(0)
end)
