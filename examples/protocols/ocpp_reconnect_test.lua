-- moonwire.ocpp across a restart of the real central system (the Python `ocpp`
-- library's, Tests/MoonwireCoreTests/Peers/ocpp_central_system.py): the charge
-- point reconnects and boots again (its on_open handler), the CALL in flight when
-- the central system went away fails in words (it is not sent again: the central
-- system may have acted on it), and a CALL made while it was away waits for the
-- reconnect and is answered.
--
--   OCPP_CS_URL=ws://127.0.0.1:PORT OCPP_CS_STOP='kill ...' OCPP_CS_START='python ... &' \
--   moonwire test examples/protocols/ocpp_reconnect_test.lua      (scripts/protocols/ocpp.sh sets these)
local ocpp = require "moonwire.ocpp"

local CS_URL = assert(os.getenv("OCPP_CS_URL"), "OCPP_CS_URL: the Python central system's URL")
local STOP = assert(os.getenv("OCPP_CS_STOP"), "OCPP_CS_STOP: a shell command that stops it")
local START = assert(os.getenv("OCPP_CS_START"),
  "OCPP_CS_START: a shell command that starts it again in the background")

describe("OCPP charge point across a central system restart", function()
  it("reconnects, boots again, fails the call in flight and sends the one that waited", function()
    local cp = ocpp.connect(CS_URL, { id = "restart-" .. math.random(1 << 20), version = "1.6", timeout = 15,
                                      reconnect = { initial = 0.2, factor = 1.5, max = 1, attempts = 60 } })
    finally(function() cp:close() end)
    local boots = {}
    cp:on_open(function(_, info)
      local result, err = cp:call("BootNotification", { chargePointVendor = "moonwire", chargePointModel = "test" })
      boots[#boots + 1] = { reconnects = info.reconnects, status = result and result.status or err }
    end)
    assert(cp:wait_open(10))

    -- The central system answers data "slow" after 1.5 s; it is stopped before that.
    mw.after(0.3, function() assert(os.execute(STOP)) end)
    local result, err = cp:call("DataTransfer", { vendorId = "echo", data = "slow" })
    assert.is_nil(result)
    assert.matches("^DataTransfer: connection closed before the answer %(closed with 100%d.*%); not sent again", err)

    -- Made while the central system is down: it waits for the reconnect, after the boot.
    mw.after(0.2, function() assert(os.execute(START)) end)
    local beat = assert(cp:call("Heartbeat"))
    assert.is_string(beat.currentTime)
    assert.are.same({ { reconnects = 0, status = "Accepted" }, { reconnects = 1, status = "Accepted" } }, boots)
    assert.are.equal(1, cp.connection:stats().reconnects)
  end)
end)
