-- MQTT 3.1.1 over WebSocket with require "moonwire.mqtt": CONNECT/CONNACK,
-- SUBSCRIBE/SUBACK, PUBLISH at QoS 0 and 1 (with PUBACK both ways), DISCONNECT.
-- The module writes and reads the packets (remaining-length varints, packet ids,
-- the PUBACK of what the broker delivers, PINGREQ); each line printed names the
-- packet that answered. examples/mqtt_bot.lua is a fuller bot, docs/protocols/mqtt.md
-- the reference.
--
--   moonwire run examples/mqtt_ws.lua ws://127.0.0.1:8080/ [topic]
-- (mosquitto: `listener 8080` + `protocol websockets` + `allow_anonymous true`)
local mqtt = require "moonwire.mqtt"

local url = mw.args[1] or "ws://127.0.0.1:8080/"
local topic = mw.args[2] or "moonwire/example"

-- "mqtt" is the subprotocol MQTT over WebSocket requires; connect returns once the
-- broker's CONNACK accepted the session (else nil and the reason in words).
local m = assert(mqtt.connect(url, { client_id = "moonwire-" .. math.random(1 << 30) }))
print("CONNACK", m.return_code)

print("SUBACK", assert(m:subscribe(topic, { qos = 1 })))   -- the granted QoS

assert(m:publish(topic, "hello at QoS 0"))
local msg = assert(m:expect(topic, 10))
print("PUBLISH", msg.topic, msg.payload, "qos " .. msg.qos)

-- QoS 1: the broker acknowledges ours (PUBACK for its packet id), and delivers it back
-- with an id of its own, which the module acknowledges.
local id = assert(m:publish(topic, "hello at QoS 1", { qos = 1, wait = false }))
assert(m:flush(10))
print("PUBACK", id)
msg = assert(m:expect(topic, 10))
print("PUBLISH", msg.topic, msg.payload, "qos " .. msg.qos)

m:disconnect()
