-- An MQTT bot on require "moonwire.mqtt": it connects (MQTT 3.1.1; pass 5 as the
-- second argument for 5.0) with a will, says it is online in a retained message,
-- answers commands through a subscription handler, and publishes at QoS 0, 1 and 2,
-- each call returning once the broker acknowledged it. The keep-alive (PINGREQ) and
-- the reconnects (re-CONNECT, re-SUBSCRIBE, in-flight publishes sent again) are the
-- module's business; the bot only logs the reconnect.
--
--   moonwire run examples/mqtt_bot.lua ws://127.0.0.1:8080/      (mosquitto's websockets listener)
--   moonwire run examples/mqtt_bot.lua tcp://127.0.0.1:1883 5     (plain TCP, MQTT 5.0)
-- or MQTT_URL=... moonwire run examples/mqtt_bot.lua. scripts/protocols/mqtt.sh runs it
-- against mosquitto over both transports.
local mqtt = require "moonwire.mqtt"

local url = mw.args[1] or os.getenv("MQTT_URL") or "ws://127.0.0.1:8080/"
local prefix = "moonwire/bot"

local bot = assert(mqtt.connect(url, {
  client_id = ("moonwire-bot-%d"):format(math.random(1 << 30)),
  version = tonumber(mw.args[2]) or 4,
  keepalive = 30,
  -- Published by the broker if the bot vanishes without a DISCONNECT.
  will = { topic = prefix .. "/status", payload = "offline", qos = 1, retain = true },
}))
bot:on_reconnect(function(_, info)
  mw.log.info("back: session present %s, %d re-subscribed, %d publishes sent again",
    tostring(info.session_present), info.resubscribed, info.resent)
end)
assert(bot:publish(prefix .. "/status", "online", { qos = 1, retain = true }))

-- Commands go to their handler. Each handler call is a coroutine of its own, so it
-- may wait: here for the broker's PUBACK of its answer.
assert(bot:subscribe(prefix .. "/cmd/+", { qos = 1 }, function(msg)
  assert(bot:publish(prefix .. "/chat/reply", "pong to " .. msg.payload, { qos = 1 }))
end))

local granted = assert(bot:subscribe(prefix .. "/chat/+", { qos = 2 }))
print(("subscribed to %s/chat/+ at QoS %d"):format(prefix, granted))

assert(bot:publish(prefix .. "/chat/hello", "hello at QoS 0"))
assert(bot:publish(prefix .. "/chat/ack", "acknowledged at QoS 1", { qos = 1 }))    -- waits for PUBACK
assert(bot:publish(prefix .. "/chat/once", "exactly once at QoS 2", { qos = 2 }))   -- PUBREC, PUBREL, PUBCOMP
for _, topic in ipairs { "hello", "ack", "once" } do
  local msg = assert(bot:expect(prefix .. "/chat/" .. topic, 5))
  print(msg.topic, msg.payload, "qos " .. msg.qos)
end

assert(bot:publish(prefix .. "/cmd/ping", "ping", { qos = 1 }))
local reply = assert(bot:expect(prefix .. "/chat/reply", 5))
print(reply.topic, reply.payload)

-- A retained message comes to every new subscriber, marked retain.
assert(bot:subscribe(prefix .. "/status", { qos = 1 }))
local status = assert(bot:expect(prefix .. "/status", 5))
print("retained: " .. status.topic, status.payload, status.retain and "(retain)" or "")

bot:disconnect()   -- a clean DISCONNECT: the broker does not publish the will
print("done")
