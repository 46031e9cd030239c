-- A mock MQTT broker on require "moonwire.mqtt": mqtt.broker listens (plain TCP, or
-- WebSocket with subprotocol mqtt for a ws:// URL) and routes PUBLISH at QoS 0 and 1
-- to every matching subscription (+ and # wildcards), keeps retained messages and
-- answers PINGREQ. It prints what its clients do, one line each. Real clients talk
-- to it as to any broker:
--
--   moonwire run examples/mqtt_mock.lua tcp://127.0.0.1:1883
--   mosquitto_sub -h 127.0.0.1 -p 1883 -t 'mock/#' -v
--   mosquitto_pub -h 127.0.0.1 -p 1883 -t mock/door -m open -q 1
--
-- scripts/protocols/mqtt.sh runs it against mosquitto_sub and mosquitto_pub.
local mqtt = require "moonwire.mqtt"

local url = mw.args[1] or os.getenv("MQTT_MOCK_URL") or "tcp://127.0.0.1:1883"
local broker = assert(mqtt.broker(url))

broker:on_connect(function(client_id, info)
  print("connect", client_id, info.version == 5 and "MQTT 5.0" or "MQTT 3.1.1")
end)
broker:on_subscribe(function(client_id, filter, qos)
  print("subscribe", client_id, filter, "qos " .. qos)
end)
broker:on_publish(function(msg)
  print("publish", msg.topic, msg.payload, "qos " .. msg.qos, msg.retain and "retain" or "")
end)
mw.log.info("mock MQTT broker on " .. broker:url())
