-- The client side of the reconnect storm (bench/storm/run.sh): this worker's
-- share of N connections, each reconnecting at once when dropped (50 ms first
-- delay, as a client that retries fast would), kept until the run is killed.
--   moonwire run --workers W bench/storm/clients.lua URL N
local url, n = mw.args[1], tonumber(mw.args[2])
local mine = n // mw.workers + (mw.worker <= n % mw.workers and 1 or 0)
for _ = 1, mine do
  mw.connect(url, { heartbeat = false, connect_timeout = 30,
    reconnect = { initial = 0.05, factor = 2, max = 1, jitter = 0.2, attempts = 100 } })
end
