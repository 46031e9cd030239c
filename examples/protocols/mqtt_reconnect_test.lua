-- require "moonwire.mqtt" across a broker restart: mosquitto (with persistence) is
-- stopped under two clients and started again on the same ports.
--  * "kept" (WebSocket, MQTT 3.1.1, clean = false, QoS 1): the broker keeps its session;
--    what was published while it was away, its own publish made while the broker was
--    down, and a stream of 50 under way across the restart all arrive once it is back:
--    nothing lost at QoS 1.
--  * "fresh" (TCP, MQTT 5.0, clean session): the broker forgot it; the module
--    re-subscribes by itself and says so in the reconnect event.
-- scripts/protocols/mqtt.sh runs it, with the commands that stop and start the broker:
--
--   MQTT_WS_URL=... MQTT_TCP_URL=... MQTT_BROKER_STOP='...' MQTT_BROKER_START='...' \
--     moonwire test examples/protocols/mqtt_reconnect_test.lua --timeout 30
local mqtt = require "moonwire.mqtt"

local WS, TCP = os.getenv("MQTT_WS_URL"), os.getenv("MQTT_TCP_URL")
local STOP, START = os.getenv("MQTT_BROKER_STOP"), os.getenv("MQTT_BROKER_START")
assert(WS and TCP and STOP and START, "set MQTT_WS_URL, MQTT_TCP_URL, MQTT_BROKER_STOP and MQTT_BROKER_START")
local tcp_port = TCP:match(":(%d+)$")

describe("a broker restart", function()
  it("restores both sessions; nothing published at QoS 1 is lost", function()
    local quick = { initial = 0.1, factor = 2, max = 0.5, jitter = 0 }
    local run = math.random(1 << 30)
    local kept_topic, fresh_topic = ("restart/%d/kept"):format(run), ("restart/%d/fresh"):format(run)
    local kept = assert(mqtt.connect(WS, { client_id = "mw-kept-" .. run, clean = false, reconnect = quick }))
    local fresh = assert(mqtt.connect(TCP, { version = 5, reconnect = quick }))
    -- Each reconnect event, as it comes (either client may be back first).
    local back = {}
    kept:on_reconnect(function(_, info) back.kept = info end)
    fresh:on_reconnect(function(_, info) back.fresh = info end)
    assert(kept:subscribe(kept_topic .. "/#", { qos = 1 }))
    assert(fresh:subscribe(fresh_topic, { qos = 1 }))
    assert(kept:publish(kept_topic .. "/0", "before", { qos = 1 }))
    assert.are.equal("before", assert(kept:expect(kept_topic .. "/0", 5)).payload)

    -- A stream of 50 QoS 1 messages from the fresh client to the kept one, under way
    -- while the broker goes down: a coroutine of its own, which waits for a slot in the
    -- in-flight window (20) and goes on after the reconnect.
    local streamed = false
    mw.spawn(function()
      for i = 1, 50 do assert(fresh:publish(kept_topic .. "/stream", tostring(i), { qos = 1, wait = false })) end
      assert(fresh:flush(20))
      streamed = true
    end)

    assert(os.execute(STOP))
    for _, m in ipairs { kept, fresh } do
      if m:connected() then assert(m:wait("close", 5)) end
    end

    -- While the broker is down: a QoS 1 publish waits in flight, to go out after the reconnect.
    local id = kept:publish(kept_topic .. "/1", "published while the broker was down", { qos = 1, wait = false })
    assert.is_number(id)
    assert.are.equal(1, kept:stats().inflight)

    -- Up again, and before the clients are back (this loop is not running yet), another
    -- client publishes: the broker keeps it for the kept session.
    assert(os.execute(START))
    assert(os.execute(("mosquitto_pub -h 127.0.0.1 -p %s -q 1 -t %s/2 -m 'published while it was away'")
      :format(tcp_port, kept_topic)))

    if not back.kept then assert(kept:wait("reconnect", 10)) end
    if not back.fresh then assert(fresh:wait("reconnect", 10)) end
    assert.is_true(back.kept.session_present)
    assert.are.equal(0, back.kept.resubscribed)
    assert.are.equal(1, back.kept.resent)
    assert.is_false(back.fresh.session_present)
    assert.are.equal(1, back.fresh.resubscribed)

    assert.are.equal("published while the broker was down", assert(kept:expect(kept_topic .. "/1", 5)).payload)
    assert.are.equal("published while it was away", assert(kept:expect(kept_topic .. "/2", 5)).payload)
    assert.is_true(kept:flush(5))
    assert.are.equal(1, kept:stats().reconnects)

    -- Every one of the 50 arrives (at least once: QoS 1 may repeat one the broker had
    -- not acknowledged when it went down).
    local got, distinct = {}, 0
    while distinct < 50 do
      local msg = assert(kept:expect(kept_topic .. "/stream", 5))
      if not got[msg.payload] then
        got[msg.payload] = true
        distinct = distinct + 1
      end
    end
    for i = 1, 50 do assert.is_true(got[tostring(i)]) end
    if not streamed then assert(fresh:flush(5)) end

    -- The fresh client's subscription is the broker's again: a message reaches it.
    assert(kept:publish(fresh_topic, "after the restart", { qos = 1 }))
    assert.are.equal("after the restart", assert(fresh:expect(fresh_topic, 5)).payload)
    kept:disconnect()
    fresh:disconnect()
  end)
end)
