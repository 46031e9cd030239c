-- moonwire's side of bench/mqtt/run.sh: one subscriber and one publisher connection
-- (require "moonwire.mqtt"), N messages of SIZE bytes published at QOS as fast as the
-- connection takes them (QoS 0: drain when the send budget is full, and a loop turn
-- every 256; QoS 1: wait = false
-- in the default in-flight window of 20, as paho's), timed from the first publish to
-- the last message received. Prints one JSON line.
--   moonwire run bench/mqtt/moonwire_client.lua PORT QOS N SIZE
local mqtt = require "moonwire.mqtt"

local port, qos, n, size = mw.args[1], tonumber(mw.args[2] or 0), tonumber(mw.args[3] or 100000), tonumber(mw.args[4] or 64)
local url = "tcp://127.0.0.1:" .. port
local topic = ("bench/moonwire/%d"):format(math.random(1 << 30))

local received, start, finish = 0, nil, nil
local sub = assert(mqtt.connect(url, { client_id = "mw-sub-" .. topic:match("%d+$") }))
local all = mw.after(tonumber(os.getenv("MQTT_BENCH_TIMEOUT") or 120), function() mw.log.error("timed out with %d of %d received", received, n) mw.exit(1) end)
assert(sub:subscribe(topic, { qos = qos }, function()
  received = received + 1
  if received == n then
    finish = mw.now()
    all:cancel()
    print(mw.json.encode { client = "moonwire", qos = qos, n = n, size = size, received = received, ok = true,
      seconds = math.floor((finish - start) * 1e4 + 0.5) / 1e4, msgs_per_s = math.floor(n / (finish - start) + 0.5) })
    sub:disconnect()
  end
end))

local pub = assert(mqtt.connect(url, { client_id = "mw-pub-" .. topic:match("%d+$") }))
local payload = string.rep("x", size)
start = mw.now()
if qos == 0 then
  for i = 1, n do
    while not pub:publish(topic, payload) do pub:drain() end
    -- Let the loop turn now and then (the subscriber reads meanwhile), as paho's
    -- network thread runs beside its publishing thread.
    if i % 256 == 0 then mw.sleep(0) end
  end
else
  for _ = 1, n do pub:publish(topic, payload, { qos = qos, wait = false }) end
  assert(pub:flush(60))
end
if not finish then sub:wait("close", 120) end
pub:disconnect()
