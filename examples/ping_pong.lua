-- ping_pong.lua: one message at a time between two threads, the round trip timed.
-- Worker 1 is an echo server on 127.0.0.1:PORT; worker 2 sends a message, waits
-- for its echo and sends again, COUNT times. Run it as it is, then with busy
-- polling off, to see what polling for the answer after each send saves when
-- the answer comes from another thread (docs/scripting.md, "Waiting for an answer"):
--   moonwire run --workers 2 examples/ping_pong.lua 2000 9130
--   moonwire run --workers 2 --busy-poll 0 examples/ping_pong.lua 2000 9130
-- Worker 2 prints the count, then the median and 99th percentile round trip.
local n = math.tointeger(tonumber(mw.args[1] or "2000"))
local port = math.tointeger(tonumber(mw.args[2] or "9130"))
if not (n and port) then error("usage: moonwire run --workers 2 ping_pong.lua [COUNT [PORT]]", 0) end
local url = ("ws://127.0.0.1:%d/"):format(port)

if mw.worker == 1 then
  local server = assert(mw.listen(url))
  server:on_message(function(peer, msg) peer:send(msg) end)
  server:on_close(function() server:close() end)    -- one client: done when it goes
  return
end

-- Worker 2 may dial before worker 1 listens: retry soon.
local c = mw.connect(url, { reconnect = { initial = 0.05, factor = 1, jitter = 0, attempts = 100 } })
local times, sent_at = {}, 0
c:on_open(function(conn)
  sent_at = mw.now()
  conn:send("ping")
end)
c:on_message(function(conn, msg)
  times[#times + 1] = (mw.now() - sent_at) * 1e6
  if #times < n then
    sent_at = mw.now()
    conn:send(msg)
    return
  end
  table.sort(times)
  print(("%d round trips"):format(#times))
  print(("p50 %.1f us, p99 %.1f us"):format(times[(#times + 1) // 2], times[math.ceil(#times * 0.99)]))
  conn:close()
end)
