-- moonwire.ocpp against the real `ocpp` library (mobilityhouse, PyPI), OCPP 1.6
-- and 2.0.1: moonwire's charge point against a Python central system, and
-- moonwire's central system against a Python charge point; then a misbehaving
-- server, played by a moonwire server in this file.
--
--   OCPP_CS_URL=ws://127.0.0.1:PORT OCPP_PYTHON=/tmp/mwvenv/bin/python \
--   OCPP_PEERS=Tests/MoonwireCoreTests/Peers moonwire test examples/protocols/ocpp_test.lua
-- (scripts/protocols/ocpp.sh starts the central system and sets these.)
local ocpp = require "moonwire.ocpp"

local CS_URL = assert(os.getenv("OCPP_CS_URL"), "OCPP_CS_URL: the Python central system's URL")
local PYTHON = os.getenv("OCPP_PYTHON") or "/tmp/mwvenv/bin/python"
local PEERS = os.getenv("OCPP_PEERS") or "Tests/MoonwireCoreTests/Peers"

-- What each version calls things.
local V = {
  ["1.6"] = {
    boot = { chargePointVendor = "moonwire", chargePointModel = "test" },
    authorize = function(tag) return { idTag = tag } end,
    authorized = function(r) return r.idTagInfo.status end,
    reset = "Hard", get = "GetConfiguration",
  },
  ["2.0.1"] = {
    boot = { chargingStation = { vendorName = "moonwire", model = "test" }, reason = "PowerUp" },
    authorize = function(tag) return { idToken = { idToken = tag, type = "Central" } } end,
    authorized = function(r) return r.idTokenInfo.status end,
    reset = "Immediate", get = "GetVariables",
  },
}

local n = 0
local function fresh_id(prefix)
  n = n + 1
  return ("%s-%d-%d"):format(prefix, math.random(1 << 20), n)
end

for _, version in ipairs(ocpp.versions) do
  local v = V[version]

  describe("OCPP " .. version .. " charge point against the ocpp library's central system", function()
    local cp
    before_each(function()
      cp = ocpp.connect(CS_URL, { id = fresh_id("cp"), version = version, timeout = 5, reconnect = false })
      assert(cp:wait_open(10))
    end)
    after_each(function() cp:close() end)

    it("negotiates the subprotocol and boots", function()
      assert.are.equal(version, cp.version)
      local result = assert(cp:call("BootNotification", v.boot))
      assert.are.equal("Accepted", result.status)
      assert.are.equal(300, result.interval)
      assert.is_string(result.currentTime)
    end)

    it("gets answers in order: Heartbeat, Authorize, DataTransfer", function()
      assert.is_string(assert(cp:call("Heartbeat")).currentTime)
      assert.are.equal("Accepted", v.authorized(assert(cp:call("Authorize", v.authorize("good")))))
      assert.are.equal("Invalid", v.authorized(assert(cp:call("Authorize", v.authorize("bad")))))
      local echoed = assert(cp:call("DataTransfer", { vendorId = "echo", data = "héllo\0world" }))
      assert.are.same({ status = "Accepted", data = "héllo\0world" }, echoed)
    end)

    it("turns a CALLERROR into words", function()
      local sampled = version == "1.6" and { value = "1" } or { value = 1 }
      local result, err, info = cp:call("MeterValues", { connectorId = 1, evseId = 1,
        meterValue = { { timestamp = "2026-01-01T00:00:00Z", sampledValue = { sampled } } } })
      assert.is_nil(result)
      assert.matches("^MeterValues: CALLERROR NotImplemented", err)
      assert.are.equal("NotImplemented", info.code)
    end)

    it("times out in words, and a late answer does not confuse the next call", function()
      local started = mw.now()
      local result, err = cp:call("DataTransfer", { vendorId = "echo", data = "slow" }, 0.5)
      assert.is_nil(result)
      assert.are.equal("timeout after 0.5 s: DataTransfer was not answered", err)
      assert.is_true(mw.now() - started < 2)
      -- The central system answers the slow one after 1.5 s, while this call waits: ignored.
      local echoed = assert(cp:call("DataTransfer", { vendorId = "echo", data = "after" }))
      assert.are.equal("after", echoed.data)
    end)

    it("rejects misuse at the caller's line", function()
      local ok, err = pcall(cp.call, cp, 42)
      assert.is_false(ok)
      assert.matches("bad argument #1 to 'cp:call' %(action name expected, got number%)", err)
      ok, err = pcall(function() cp:call("Heartbeat", { f = print }) end)
      assert.is_false(ok)
      assert.matches("ocpp_test.lua:%d+: cp:call: payload: ", err)
    end)
  end)

  describe("OCPP " .. version .. " charge point answering the central system", function()
    it("answers Reset, and NotSupported / NotImplemented for what it does not handle", function()
      -- The central system calls charge points whose id starts with "probe" after their boot.
      local cp = ocpp.connect(CS_URL, { id = fresh_id("probe"), version = version, reconnect = false })
      finally(function() cp:close() end)
      cp:on("Reset", function(payload) return { status = payload.type == v.reset and "Accepted" or "Rejected" } end)
      cp:on("DataTransfer", function() return { status = "Accepted" } end)
      cp:on_open(function() cp:call("BootNotification", v.boot) end)
      local report = assert(cp:expect("DataTransfer", 10))
      assert.are.equal("report", report.vendorId)
      report = mw.json.decode(report.data)
      assert.are.equal("Accepted", report.Reset.result.status)
      -- Defined by the version, not handled by this script: NotSupported;
      -- defined by no version: NotImplemented (the OCPP-J error code table).
      assert.are.equal("NotSupported", report[v.get].code)
      assert.are.equal("NotImplemented", report.Bogus.code)
    end)
  end)

  describe("OCPP " .. version .. " central system against the ocpp library's charge point", function()
    it("serves a Python charge point and calls it", function()
      local cs = assert(ocpp.listen("ws://127.0.0.1:0/ocpp", { timeout = 5 }))
      finally(function() cs:close() end)
      local boots = {}
      cs:on("BootNotification", function(payload, cp)
        boots[#boots + 1] = cp.id
        return { currentTime = "2026-01-01T00:00:00Z", interval = 60, status = "Accepted" }
      end)
      cs:on("Heartbeat", function() return { currentTime = "2026-01-01T00:00:00Z" } end)
      cs:on("Authorize", function(payload)
        local tag = payload.idTag or payload.idToken.idToken
        local status = tag == "bad" and "Blocked" or "Accepted"
        return version == "1.6" and { idTagInfo = { status = status } } or { idTokenInfo = { status = status } }
      end)
      cs:on("DataTransfer", function() return { status = "Accepted" } end)

      local id = fresh_id("py")
      assert(os.execute(("%s %s/ocpp_charge_point.py %s %s %s 20 >/dev/null 2>&1 &")
        :format(PYTHON, PEERS, cs:url(), id, version)))
      local cp = assert(cs:wait_charge_point(id, 10))
      assert.are.equal(version, cp.version)

      -- The Python charge point reports what each of its calls gave.
      local report, from = assert(cs:expect("DataTransfer", id, 10))
      assert.are.equal(cp, from)
      report = mw.json.decode(report.data)
      assert.are.equal("Accepted", report.BootNotification.result.status)
      assert.is_string(report.Heartbeat.result.current_time)
      assert.is_table(report.Authorize.result)
      assert.are.equal("NotSupported", report.FirmwareStatusNotification.code)
      assert.are.equal("NotImplemented", report.Bogus.code)
      assert.are.same({ id }, boots)

      -- Calls to the charge point.
      assert.are.same({ status = "Accepted" }, assert(cp:call("Reset", { type = v.reset })))
      local result, err, info = cp:call(v.get, version == "1.6" and {} or
        { getVariableData = { { component = { name = "OCPPCommCtrlr" }, variable = { name = "HeartbeatInterval" } } } })
      assert.is_nil(result)
      -- The ocpp library answers an action it knows but has no handler for with NotImplemented.
      assert.matches("^" .. v.get .. ": CALLERROR NotImplemented", err)
      assert.are.equal("NotImplemented", info.code)
      cp:close()
    end)

    it("closes a charge point that agrees on no OCPP subprotocol", function()
      local cs = assert(ocpp.listen("ws://127.0.0.1:0/", { version = version }))
      finally(function() cs:close() end)
      local errors = {}
      cs:on_error(function(_, err) errors[#errors + 1] = err end)
      local c = mw.connect(cs:url() .. "x1", { protocols = { "mqtt" }, reconnect = false })
      local closed = {}
      c:on_close(function(_, code, reason) closed = { code, reason } end)
      assert.are.equal("closed", select(2, c:receive(5)))
      assert.are.equal(1002, closed[1])
      assert.matches("agreed on no OCPP subprotocol", errors[1])
    end)
  end)
end

describe("OCPP between moonwire's own charge point and central system", function()
  it("answers with the handler's CALLERROR, and calls both ways on one connection", function()
    local cs = assert(ocpp.listen("ws://127.0.0.1:0/csms", { version = "2.0.1" }))
    finally(function() cs:close() end)
    cs:on("BootNotification", function(_, cp)
      -- A call back to the charge point from inside a handler.
      local ok = cp:call("SetVariables", { setVariableData = {} })
      return { currentTime = "2026-01-01T00:00:00Z", interval = ok and 10 or 20, status = "Accepted" }
    end)
    local cp = ocpp.connect(cs:url(), { id = "CP 7", version = "2.0.1", reconnect = false })
    finally(function() cp:close() end)
    cp:on("SetVariables", function() return nil, "PropertyConstraintViolation", "read-only", { variable = "x" } end)
    local boot = assert(cp:call("BootNotification",
      { chargingStation = { vendorName = "m", model = "t" }, reason = "PowerUp" }))
    assert.are.equal(20, boot.interval)
    local peer = assert(cs:wait_charge_point("CP 7", 1))
    local result, err, info = peer:call("SetVariables", { setVariableData = {} })
    assert.is_nil(result)
    assert.are.equal('SetVariables: CALLERROR PropertyConstraintViolation: read-only {"variable":"x"}', err)
    assert.are.same(
      { code = "PropertyConstraintViolation", description = "read-only", details = { variable = "x" } }, info)
  end)
end)

describe("OCPP charge point against a misbehaving central system", function()
  local bad, good
  before_each(function()
    -- The hostile peer: a moonwire server that answers each CALL with what it was told to.
    bad = assert(mw.listen("ws://127.0.0.1:0/", { protocols = { "ocpp1.6" } }))
    good = ocpp.connect(CS_URL, { id = fresh_id("steady"), version = "1.6", reconnect = false })
  end)
  after_each(function() bad:close() good:close() end)

  local cases = {
    { "not JSON", "{oops", "ocpp: malformed message: not JSON" },
    { "not an array", '{"a":1}', "ocpp: malformed message: a JSON array %[type, id, ...%] expected" },
    { "a message id that is not a string", "[3, 7, {}]",
      "ocpp: malformed message: field 2 %(message id%) must be a string, got 7" },
    { "an unknown message type", '[9, "x", {}]',
      "ocpp: malformed message: field 1 %(message type%) must be 2, 3 or 4, got 9" },
  }
  for _, case in ipairs(cases) do
    it("closes that connection on " .. case[1] .. " and keeps serving the others", function()
      bad:on_message(function(peer) peer:send(case[2]) end)
      local cp = ocpp.connect(bad:url() .. "evil", { version = "1.6", reconnect = false, timeout = 5 })
      local errors = {}
      cp:on_error(function(_, err) errors[#errors + 1] = err end)
      local result, err = cp:call("Heartbeat")
      assert.is_nil(result)
      assert.matches("^Heartbeat: connection closed before the answer %(closed with 1002", err)
      assert.matches("^" .. case[3], errors[1])
      -- The other connection is unaffected.
      assert(good:wait_open(10))
      assert.is_string(assert(good:call("Heartbeat")).currentTime)
    end)
  end

  it("fails a malformed CALLRESULT's call in words, without closing", function()
    bad:on_message(function(peer, text)
      local id = mw.json.decode(text)[2]
      peer:send(mw.json.encode(mw.json.array({ 3, id, "not an object" })))
    end)
    local cp = ocpp.connect(bad:url() .. "odd", { version = "1.6", reconnect = false })
    finally(function() cp:close() end)
    local result, err = cp:call("Heartbeat")
    assert.is_nil(result)
    assert.are.equal(
      'Heartbeat: malformed CALLRESULT: field 3 (payload) must be a JSON object, got "not an object"', err)
    assert.are.equal("open", cp.connection:state())
  end)
end)
