-- A STOMP 1.2 bot (moonwire.stomp): it connects to a broker over WebSocket
-- (subprotocol v12.stomp) or TCP, subscribes to a queue with client acks, sends
-- N messages with a receipt each, and acknowledges each message it gets back.
-- Heart-beats are negotiated and answered without the script seeing them; an
-- ERROR frame from the broker comes back in words.
--
--   moonwire run examples/stomp_bot.lua ws://127.0.0.1:15674/ws [count]
--   moonwire run examples/stomp_bot.lua tcp://127.0.0.1:61613 [count]
-- (STOMP_URL may give the URL instead; RabbitMQ with rabbitmq_web_stomp / rabbitmq_stomp,
-- user guest/guest, is what scripts/protocols/stomp.sh runs it against.)
local stomp = require "moonwire.stomp"

local url = mw.args[1] or os.getenv("STOMP_URL") or "ws://127.0.0.1:15674/ws"
local count = tonumber(mw.args[2] or "3")
local queue = "/queue/moonwire-bot-" .. math.random(1 << 30)

local client = stomp.connect(url, { login = "guest", passcode = "guest", heart_beat = { 5000, 5000 } })
client:on_error(function(_, err) print("broker error: " .. err) end)
local connected = assert(client:wait_connected(30))
print(("connected to %s (STOMP %s, heart-beat %s)"):format(
  connected.server or "a broker", connected.version, connected["heart-beat"]))

local sub = assert(client:subscribe(queue, { ack = "client-individual", receipt = true }))

for i = 1, count do
  assert(client:send(queue, ("message %d of %d"):format(i, count), { ["content-type"] = "text/plain", receipt = true }))
end

for i = 1, count do
  local msg = assert(sub:receive(10))
  assert(msg:ack())
  print(("received %d of %d: %s"):format(i, count, msg.body))
end

sub:unsubscribe()
assert(client:disconnect())
