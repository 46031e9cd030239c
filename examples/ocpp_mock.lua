-- A mock OCPP central system (moonwire.ocpp's server side) for testing charge
-- points: it speaks 1.6 and 2.0.1 (the charge point's offered subprotocol
-- decides), accepts every BootNotification, answers Heartbeat, StatusNotification,
-- Authorize and DataTransfer, and asks each charge point that boots for a Reset.
-- A CALL it has no handler for gets the OCPP-J CALLERROR (NotSupported).
--
--   moonwire run examples/ocpp_mock.lua [ws://127.0.0.1:9000/ocpp] [charge points to serve]
-- With a count, it exits once that many charge points have come and gone
-- (exit 1 if one of them did not accept the Reset); without, it serves until stopped.
local ocpp = require "moonwire.ocpp"

local url = mw.args[1] or os.getenv("OCPP_LISTEN") or "ws://127.0.0.1:9000/ocpp"
local serve = tonumber(mw.args[2] or "")

local cs = assert(ocpp.listen(url, { timeout = 10 }))
print("central system on " .. cs:url())

local function now() return os.date("!%Y-%m-%dT%H:%M:%SZ") end

cs:on("BootNotification", function(payload, cp)
  local vendor = payload.chargePointVendor or payload.chargingStation.vendorName
  print(("%s booted (OCPP %s, vendor %s)"):format(cp.id, cp.version, vendor))
  -- After the answer has gone: ask for a reset, in a coroutine of its own.
  mw.after(0, function()
    mw.spawn(function()
      local result, err = cp:call("Reset", { type = cp.version == "1.6" and "Hard" or "Immediate" })
      print(("%s: Reset %s"):format(cp.id, result and result.status or err))
      cp.reset = result and result.status
    end)
  end)
  return { currentTime = now(), interval = 300, status = "Accepted" }
end)
cs:on("Heartbeat", function() return { currentTime = now() } end)
cs:on("StatusNotification", function() return {} end)
cs:on("Authorize", function(payload, cp)
  if cp.version == "1.6" then return { idTagInfo = { status = "Accepted" } } end
  return { idTokenInfo = { status = "Accepted" } }
end)
cs:on("DataTransfer", function(payload, cp)
  print(("%s: DataTransfer from %s: %s"):format(cp.id, payload.vendorId, payload.data))
  return { status = "Accepted" }
end)

local gone, failed = 0, 0
cs:on_close(function(cp, code)
  print(("%s disconnected (%d)"):format(cp.id, code))
  gone = gone + 1
  if cp.reset ~= "Accepted" then failed = failed + 1 end
  if serve and gone >= serve then
    cs:close()
    mw.exit(failed == 0 and 0 or 1)
  end
end)
