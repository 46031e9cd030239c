-- load_workers.lua: load that needs more than one core. Run it with --workers N:
-- every worker (a Lua state of its own on a thread of its own, sharing nothing)
-- opens CONNS connections, makes ROUNDS echo round trips on each, and prints one
-- line. With no URL (or "-") each worker starts an echo server of its own.
--   moonwire run --workers 4 examples/load_workers.lua [ws://127.0.0.1:9000/ [CONNS [ROUNDS]]]
local url = mw.args[1] ~= "-" and mw.args[1] or nil
local conns = tonumber(mw.args[2]) or 4
local rounds = tonumber(mw.args[3]) or 100

local server
if not url then
  server = assert(mw.listen("ws://127.0.0.1:0/echo"))
  server:on_message(function(peer, msg, kind) peer:send(msg, kind) end)
  url = server:url()
end

local started, finished, trips = mw.now(), 0, 0
for i = 1, conns do
  mw.spawn(function()
    local c = mw.connect(url, { reconnect = false })
    assert(c:wait_open(5))
    for n = 1, rounds do
      local msg = ("worker %d conn %d #%d"):format(mw.worker, i, n)
      assert(c:send(msg))
      assert(assert(c:receive(5)) == msg, "the echo differs")
      trips = trips + 1
    end
    c:close()
    finished = finished + 1
    if finished == conns then
      print(("worker %d of %d: %d connections, %d round trips"):format(mw.worker, mw.workers, conns, trips))
      mw.log.info("%.0f round trips/s", trips / (mw.now() - started))
      if server then server:close() end
    end
  end)
end
