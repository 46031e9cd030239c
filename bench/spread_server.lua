-- spread_server.lua: the seed's latency test, server side. Once CLIENTS peers
-- are connected it prints CONNECTED, waits for GOFILE (written by bench/spread.sh
-- once every server is ready) to hold a start time on the machine's monotonic
-- clock (mw.now), and from then broadcasts a timestamped message ROUNDS times,
-- INTERVAL seconds apart (0.05). Several servers given the same GOFILE broadcast in step.
--   moonwire run bench/spread_server.lua URL CLIENTS ROUNDS GOFILE [INTERVAL]
local url, clients, rounds, gofile = mw.args[1], tonumber(mw.args[2]), tonumber(mw.args[3]), mw.args[4]
local interval = tonumber(mw.args[5] or "0.05")
local server = assert(mw.listen(url))
io.stdout:write("READY ", server:url(), "\n")
io.stdout:flush()

local function broadcast_from(start)
  local sent = 0
  mw.after(math.max(0, start - mw.now()), function()
    local function round()
      sent = sent + 1
      server:broadcast(("%d %.9f"):format(sent, mw.now()))
    end
    local function done() mw.after(1, function() server:close() end) end
    round()
    if sent == rounds then return done() end
    mw.every(interval, function(timer)
      round()
      if sent == rounds then
        timer:cancel()
        done()
      end
    end)
  end)
end

local connected = 0
server:on_connect(function()
  connected = connected + 1
  if connected ~= clients then return end
  io.stdout:write("CONNECTED\n")
  io.stdout:flush()
  mw.every(0.01, function(timer)
    local f = io.open(gofile)
    local start = f and tonumber(f:read("l"))
    if f then f:close() end
    if start then
      timer:cancel()
      broadcast_from(start)
    end
  end)
end)
