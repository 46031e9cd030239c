-- spread_clients.lua: the seed's latency test, client side: CLIENTS
-- connections in one process; for every broadcast round, the spread between
-- the first and the last receipt, and the latency from the server's stamp
-- (both processes share the machine's monotonic clock).
--   moonwire run bench/spread_clients.lua URL CLIENTS ROUNDS
local url, clients, rounds = mw.args[1], tonumber(mw.args[2]), tonumber(mw.args[3])
local first, last, count, latency = {}, {}, {}, {}
for _ = 1, clients do
  local c = mw.connect(url, { heartbeat = false, reconnect = false })
  c:on_message(function(_, msg)
    local now = mw.now()
    local round, stamp = msg:match("^(%d+) (%S+)")
    round = tonumber(round)
    first[round] = first[round] or now
    last[round] = now
    count[round] = (count[round] or 0) + 1
    latency[#latency + 1] = now - tonumber(stamp)
  end)
end

local function percentile(list, p)
  table.sort(list)
  return list[math.max(1, math.ceil(#list * p))]
end

mw.after(rounds * 0.05 + 5, function()
  local spreads, complete = {}, 0
  for r = 1, rounds do
    if first[r] then spreads[#spreads + 1] = last[r] - first[r] end
    if count[r] == clients then complete = complete + 1 end
  end
  print(mw.json.encode({
    clients = clients, rounds = rounds, complete_rounds = complete,
    spread_p50_ms = percentile(spreads, 0.5) * 1e3, spread_p99_ms = percentile(spreads, 0.99) * 1e3,
    latency_p50_ms = percentile(latency, 0.5) * 1e3, latency_p99_ms = percentile(latency, 0.99) * 1e3,
  }))
  mw.exit(0)
end)
