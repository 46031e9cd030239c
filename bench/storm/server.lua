-- The server side of the reconnect storm (bench/storm/run.sh): waits for N
-- clients, drops them all at once (peer:abort(), as a crash would), then times
-- how long after the drop each of them is connected again. Prints one JSON line:
-- p50/p99/max from the start of the drop; `drop`, how long the loop of N aborts
-- took (the last client was dropped that much after the first, and the loop
-- accepted nothing meanwhile); `cpu_us`, this process's CPU time from the drop to
-- the last client back, per client (aborts, accepts, upgrades, on_connect).
--   moonwire run bench/storm/server.lua PORT N [BACKLOG]
local port, n, backlog = tonumber(mw.args[1]), tonumber(mw.args[2]), tonumber(mw.args[3])
local s = assert(mw.listen(("ws://127.0.0.1:%d/"):format(port), { backlog = backlog, heartbeat = false }))
local peers, dropped_at, drop_took, cpu_at, back = {}, nil, nil, nil, {}
s:on_connect(function(peer)
  if dropped_at then
    back[#back + 1] = mw.now() - dropped_at
    if #back == n then
      table.sort(back)
      local function q(p) return back[math.max(1, math.ceil(p * n))] end
      print(mw.json.encode({ clients = n, backlog = backlog or "system",
        p50 = q(0.5), p99 = q(0.99), max = back[n], drop = drop_took,
        cpu_us = (os.clock() - cpu_at) / n * 1e6 }))
      mw.exit(0)
    end
    return
  end
  peers[#peers + 1] = peer
  if #peers == n then
    print("READY") io.stdout:flush()
    mw.after(0.5, function()
      dropped_at, cpu_at = mw.now(), os.clock()
      for _, p in ipairs(peers) do p:abort() end
      drop_took = mw.now() - dropped_at
      peers = nil
    end)
  end
end)
