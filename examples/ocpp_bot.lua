-- An OCPP charge point bot (moonwire.ocpp): it connects to a central system as
-- ws://HOST/PATH/<id> with the version's subprotocol, sends BootNotification on
-- every (re)connect, then StatusNotification and a few Heartbeats, and answers
-- the central system's Reset. Calls go one at a time, as OCPP-J requires; an
-- answer that does not come is "timeout after N s", a CALLERROR comes back in words.
--
--   moonwire run examples/ocpp_bot.lua ws://127.0.0.1:9000/ocpp [1.6|2.0.1] [heartbeats]
-- (OCPP_URL may give the URL instead; any OCPP-J central system will do, e.g. one
-- written with the Python `ocpp` library: Tests/MoonwireCoreTests/Peers/ocpp_central_system.py)
local ocpp = require "moonwire.ocpp"

local url = mw.args[1] or os.getenv("OCPP_URL") or "ws://127.0.0.1:9000/ocpp"
local version = mw.args[2] or "1.6"
local beats = tonumber(mw.args[3] or "3")

local cp = ocpp.connect(url, { id = "moonwire-bot-" .. mw.worker, version = version, timeout = 10 })

local boot = version == "1.6"
  and { chargePointVendor = "moonwire", chargePointModel = "bot" }
  or { chargingStation = { vendorName = "moonwire", model = "bot" }, reason = "PowerUp" }
local status = version == "1.6"
  and { connectorId = 1, errorCode = "NoError", status = "Available" }
  or { timestamp = "2026-01-01T00:00:00Z", connectorStatus = "Available", evseId = 1, connectorId = 1 }

-- Every open, the first one and each reconnect: boot first (these calls go
-- before any call that waited for the connection).
cp:on_open(function(_, info)
  local result, err = cp:call("BootNotification", boot)
  if not result then return print("boot failed: " .. err) end
  print(("booted (OCPP %s, reconnects %d): %s, heartbeat every %d s")
    :format(info.version, info.reconnects, result.status, result.interval))
end)

cp:on("Reset", function(payload)
  print("the central system asks for a reset: " .. payload.type)
  return { status = "Accepted" }
end)

assert(cp:wait_open(10))
assert(cp:call("StatusNotification", status))
for i = 1, beats do
  local result, err = cp:call("Heartbeat")
  if not result then print("heartbeat failed: " .. err) break end
  print(("heartbeat %d: the central system's time is %s"):format(i, result.currentTime))
end
cp:close()
