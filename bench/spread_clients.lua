-- spread_clients.lua: the seed's latency test, client side: CLIENTS
-- connections in one process. Once it has seen the last of ROUNDS broadcasts
-- (and one second more), it prints one JSON line with, per round, the first
-- and the last receipt (mw.now, the machine's monotonic clock, which the
-- server's stamps use too) and how many clients got it, and a histogram of
-- the latency from the server's stamp (0.1 ms buckets). bench/spread.sh merges
-- the lines of several client processes.
--   moonwire run bench/spread_clients.lua URL CLIENTS ROUNDS
local url, clients, rounds = mw.args[1], tonumber(mw.args[2]), tonumber(mw.args[3])
local first, last, count, latency = {}, {}, {}, {}
local reported = false

local function report()
  if reported then return end
  reported = true
  local per_round, histogram = {}, {}
  for r = 1, rounds do per_round[r] = { first[r] or false, last[r] or false, count[r] or 0 } end
  for bucket, n in pairs(latency) do histogram[#histogram + 1] = { bucket, n } end
  print(mw.json.encode({ clients = clients, rounds = rounds, per_round = per_round, latency_01ms = histogram }))
  mw.exit(0)
end

local function on_message(_, msg)
  local now = mw.now()
  local round, stamp = msg:match("^(%d+) (%S+)")
  round = tonumber(round)
  first[round] = first[round] or now
  last[round] = now
  count[round] = (count[round] or 0) + 1
  local bucket = math.floor((now - tonumber(stamp)) * 1e4)
  latency[bucket] = (latency[bucket] or 0) + 1
  if round == rounds and count[round] == 1 then mw.after(1, report) end
end

-- At most 200 handshakes in flight: 10 000 dials at once overflow the server's
-- accept backlog and time out.
local next_index = 1
local function dialer()
  while next_index <= clients do
    next_index = next_index + 1
    local c = mw.connect(url, { heartbeat = false, reconnect = false, connect_timeout = 60 })
    c:on_message(on_message)
    if not c:wait_open(60) then io.stderr:write("spread_clients: a connection did not open\n") end
  end
end
for _ = 1, math.min(200, clients) do mw.spawn(dialer) end
-- A round that never comes: report what came.
mw.after(rounds * 0.05 + 300, report)
