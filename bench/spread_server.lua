-- spread_server.lua: the seed's latency test, server side. Once CLIENTS peers
-- are connected it broadcasts a timestamped message ROUNDS times, 50 ms apart.
--   moonwire run bench/spread_server.lua URL CLIENTS ROUNDS
local url, clients, rounds = mw.args[1], tonumber(mw.args[2]), tonumber(mw.args[3])
local server = assert(mw.listen(url))
io.stdout:write("READY ", server:url(), "\n")
io.stdout:flush()
local connected = 0
server:on_connect(function()
  connected = connected + 1
  if connected == clients then
    local sent = 0
    mw.every(0.05, function(timer)
      sent = sent + 1
      server:broadcast(("%d %.9f"):format(sent, mw.now()))
      if sent == rounds then
        timer:cancel()
        mw.after(1, function() server:close() end)
      end
    end)
  end
end)
