-- require "moonwire.mqtt" against a real broker (Debian's mosquitto, started by
-- scripts/protocols/mqtt.sh, which sets the URLs below), and against hostile servers
-- made here with mw.listen that send what no broker should.
--
--   MQTT_WS_URL=ws://127.0.0.1:8080/ MQTT_TCP_URL=tcp://127.0.0.1:1883 \
--   MQTT_AUTH_URL=tcp://127.0.0.1:1884 MQTT_USER=moonwire MQTT_PASSWORD=s3cret \
--     moonwire test examples/protocols/mqtt_test.lua
local mqtt = require "moonwire.mqtt"

local WS, TCP = os.getenv("MQTT_WS_URL"), os.getenv("MQTT_TCP_URL")
local AUTH, USER, PASSWORD = os.getenv("MQTT_AUTH_URL"), os.getenv("MQTT_USER"), os.getenv("MQTT_PASSWORD")
assert(WS and TCP and AUTH, "set MQTT_WS_URL, MQTT_TCP_URL and MQTT_AUTH_URL (scripts/protocols/mqtt.sh does)")

-- A topic prefix of its own for each test, so that retained messages and sessions of
-- one test never reach another.
local serial = 0
local function fresh_topic(name)
  serial = serial + 1
  return ("moonwire/test/%d-%d/%s"):format(math.random(1 << 30), serial, name)
end

for _, case in ipairs {
  { name = "WebSocket, MQTT 3.1.1", url = WS, version = 4 },
  { name = "TCP, MQTT 3.1.1", url = TCP, version = 4 },
  { name = "WebSocket, MQTT 5.0", url = WS, version = 5 },
  { name = "TCP, MQTT 5.0", url = TCP, version = 5 },
} do
  describe(case.name, function()
    it("routes by wildcard: QoS 0, 1 and 2 both ways, each at the lower of the two QoS", function()
      local base = fresh_topic("w")
      local m = assert(mqtt.connect(case.url, { version = case.version }))
      assert.are.equal(1, m:subscribe(base .. "/+/temp", { qos = 1 }))
      assert.are.equal(2, m:subscribe(base .. "/two/#", { qos = 2 }))
      assert.is_true(m:publish(base .. "/kitchen/temp", "q0"))
      assert.is_true(m:publish(base .. "/kitchen/temp", "q1", { qos = 1 }))
      assert.is_true(m:publish(base .. "/kitchen/temp", "q2", { qos = 2 }))
      assert.is_true(m:publish(base .. "/kitchen/humidity", "not subscribed", { qos = 1 }))
      assert.is_true(m:publish(base .. "/two", "'#' matches its parent level", { qos = 2 }))
      assert.is_true(m:publish(base .. "/two/a/b", "and every level below", { qos = 2 }))
      local got = {}
      for _ = 1, 5 do
        local msg = assert(m:expect(base .. "/#", 5))
        got[#got + 1] = ("%s %s qos %d"):format(msg.topic:sub(#base + 2), msg.payload, msg.qos)
      end
      table.sort(got)   -- MQTT orders messages within one QoS only
      assert.are.same({
        "kitchen/temp q0 qos 0", "kitchen/temp q1 qos 1", "kitchen/temp q2 qos 1",
        "two '#' matches its parent level qos 2", "two/a/b and every level below qos 2",
      }, got)
      assert.are.equal(0, m:stats().inbox, "the humidity message matched no subscription")
      m:disconnect()
    end)

    it("routes each message to the handler of the subscription it matches", function()
      local base = fresh_topic("h")
      local m = assert(mqtt.connect(case.url, { version = case.version }))
      local a, b = {}, {}
      assert(m:subscribe(base .. "/a/+", { qos = 1 }, function(msg) a[#a + 1] = msg.payload end))
      assert(m:subscribe(base .. "/b/#", 1, function(msg) b[#b + 1] = msg.payload end))
      assert(m:subscribe(base .. "/end"))
      for i = 1, 3 do
        assert(m:publish(base .. "/a/" .. i, "a" .. i, { qos = 1 }))
        assert(m:publish(base .. "/b/x/" .. i, "b" .. i, { qos = 1 }))
      end
      assert(m:publish(base .. "/end", "end", { qos = 1 }))
      -- The broker delivers in order: once "end" is here, so is everything before it.
      assert(m:expect(base .. "/end", 5))
      assert.are.same({ "a1", "a2", "a3" }, a)
      assert.are.same({ "b1", "b2", "b3" }, b)
      assert.is_true(m:unsubscribe(base .. "/a/+"))
      assert(m:publish(base .. "/a/4", "after unsubscribe", { qos = 1 }))
      assert(m:publish(base .. "/end", "end again", { qos = 1 }))
      assert.are.equal("end again", assert(m:expect(base .. "/end", 5)).payload)
      assert.are.same({ "a1", "a2", "a3" }, a)
      m:disconnect()
    end)

    it("keeps retained messages for new subscribers, and clears them with an empty one", function()
      local topic = fresh_topic("retained")
      local m = assert(mqtt.connect(case.url, { version = case.version }))
      assert(m:publish(topic, "kept", { qos = 1, retain = true }))
      local late = assert(mqtt.connect(case.url, { version = case.version }))
      assert(late:subscribe(topic, { qos = 1 }))
      local msg = assert(late:expect(topic, 5))
      assert.are.equal("kept", msg.payload)
      assert.is_true(msg.retain)
      assert(m:publish(topic, "", { qos = 1, retain = true }))
      assert.are.equal("", assert(late:expect(topic, 5)).payload)
      local later = assert(mqtt.connect(case.url, { version = case.version }))
      assert(later:subscribe(topic, 1))
      assert(later:publish(topic, "live", { qos = 1 }))
      local first = assert(later:expect(topic, 5))
      assert.are.equal("live", first.payload, "no retained message left")
      assert.is_false(first.retain)
      for _, c in ipairs { m, late, later } do c:disconnect() end
    end)

    it("publishes the will when a client goes away without DISCONNECT", function()
      local topic = fresh_topic("will")
      local watcher = assert(mqtt.connect(case.url, { version = case.version }))
      assert(watcher:subscribe(topic, 1))
      local doomed = assert(mqtt.connect(case.url, { version = case.version, reconnect = false,
        will = { topic = topic, payload = "gone", qos = 1 } }))
      doomed:connection():close()   -- the socket closes, with no MQTT DISCONNECT before it
      local msg = assert(watcher:expect(topic, 5))
      assert.are.equal("gone", msg.payload)
      watcher:disconnect()
    end)

    it("keeps a session (clean = false): QoS 1 messages sent while away come after", function()
      local topic = fresh_topic("session")
      local id = ("mw-session-%d"):format(math.random(1 << 30))
      local m = assert(mqtt.connect(case.url, { version = case.version, client_id = id, clean = false }))
      assert.is_false(m.session_present)
      assert(m:subscribe(topic, 1))
      m:disconnect()
      local other = assert(mqtt.connect(case.url, { version = case.version }))
      for i = 1, 3 do assert(other:publish(topic, "while away " .. i, { qos = 1 })) end
      m = assert(mqtt.connect(case.url, { version = case.version, client_id = id, clean = false }))
      assert.is_true(m.session_present)
      for i = 1, 3 do assert.are.equal("while away " .. i, assert(m:expect(topic, 5)).payload) end
      m:disconnect()
      -- A clean session ends it.
      m = assert(mqtt.connect(case.url, { version = case.version, client_id = id, clean = true }))
      assert.is_false(m.session_present)
      m:disconnect()
      other:disconnect()
    end)

    it("bounds the in-flight window: publishes with wait = false take a slot each", function()
      local topic = fresh_topic("window")
      local m = assert(mqtt.connect(case.url, { version = case.version, max_inflight = 4 }))
      assert(m:subscribe(topic, 1))
      local most = 0
      for i = 1, 40 do
        assert.is_number(m:publish(topic, tostring(i), { qos = i % 2 + 1, wait = false }))
        most = math.max(most, m:stats().inflight)
      end
      assert.are.equal(4, most)
      assert.is_true(m:flush(5))
      assert.are.equal(0, m:stats().inflight)
      -- MQTT keeps the order within one QoS, not across them: compare the sets.
      local got = {}
      for _ = 1, 40 do got[#got + 1] = tonumber(assert(m:expect(topic, 5)).payload) end
      table.sort(got)
      for i = 1, 40 do assert.are.equal(i, got[i]) end
      m:disconnect()
    end)
  end)
end

describe("MQTT 5.0 properties and subscription options", function()
  it("carries publish properties through mosquitto, and no_local keeps our own messages from us", function()
    local topic = fresh_topic("props")
    local a = assert(mqtt.connect(TCP, { version = 5 }))
    local b = assert(mqtt.connect(WS, { version = 5 }))
    assert(a:subscribe(topic, { qos = 1, no_local = true }))
    assert(b:subscribe(topic, { qos = 1 }))
    assert(a:publish(topic, "{}", { qos = 1, properties = {
      content_type = "application/json", response_topic = topic .. "/reply", correlation_data = "\0\1\2",
      user_property = { { "trace", "42" } }, message_expiry_interval = 60 } }))
    local msg = assert(b:expect(topic, 5))
    assert.are.equal("application/json", msg.properties.content_type)
    assert.are.equal(topic .. "/reply", msg.properties.response_topic)
    assert.are.equal("\0\1\2", msg.properties.correlation_data)
    assert.are.same({ { "trace", "42" } }, msg.properties.user_property)
    assert(b:publish(topic, "from b", { qos = 1 }))
    -- a hears b's message but never its own.
    assert.are.equal("from b", assert(a:expect(topic, 5)).payload)
    assert.are.equal(0, a:stats().inbox)
    a:disconnect()
    b:disconnect()
  end)
end)

describe("CONNACK refused, in words", function()
  -- mosquitto 2.0 answers a wrong password with "not authorized", as it does a
  -- missing user name.
  it("MQTT 3.1.1: a wrong password is not authorized", function()
    local m, err = mqtt.connect(AUTH, { username = USER, password = "wrong" })
    assert.is_nil(m)
    assert.are.equal("CONNACK refused: not authorized (return code 5)", err)
  end)

  it("MQTT 3.1.1: no user name where one is wanted", function()
    local m, err = mqtt.connect(AUTH)
    assert.is_nil(m)
    assert.are.equal("CONNACK refused: not authorized (return code 5)", err)
  end)

  it("MQTT 5.0: the reason code, in words", function()
    local m, err = mqtt.connect(AUTH, { version = 5, username = USER, password = "wrong" })
    assert.is_nil(m)
    assert.are.equal("CONNACK refused: not authorized (0x87)", err)
  end)

  it("the right password is let in", function()
    local m = assert(mqtt.connect(AUTH, { username = USER, password = PASSWORD }))
    assert.is_true(m:connected())
    m:disconnect()
  end)

  it("a broker that says bad user name or password (the broker stub), 3.1.1 and 5.0", function()
    local b = assert(mqtt.broker("tcp://127.0.0.1:0", { users = { ann = "right" } }))
    local url = b:url()
    assert.are.same({ nil, "CONNACK refused: bad user name or password (return code 4)" },
      { mqtt.connect(url, { username = "ann", password = "wrong" }) })
    assert.are.same({ nil, "CONNACK refused: bad user name or password (0x86)" },
      { mqtt.connect(url, { version = 5, username = "ann", password = "wrong" }) })
    local m = assert(mqtt.connect(url, { username = "ann", password = "right" }))
    m:disconnect()
  end)

  it("no broker at all: nil and the connection's error, once the timeout is over", function()
    local m, err = mqtt.connect("tcp://127.0.0.1:9", { timeout = 0.5 })
    assert.is_nil(m)
    assert.matches("^connect: connection refused", err)
  end)
end)

describe("keep-alive", function()
  it("sends PINGREQ when idle, mosquitto and the broker stub answer; the script sees no PINGRESP", function()
    local stub = assert(mqtt.broker("ws://127.0.0.1:0/"))
    local clients = {
      assert(mqtt.connect(TCP, { keepalive = 1 })),
      assert(mqtt.connect(stub:url(), { keepalive = 1 })),
    }
    local sent = {}
    for i, m in ipairs(clients) do sent[i] = m:stats().connection.sent end
    mw.sleep(2.2)   -- two keep-alive periods: mosquitto would drop a silent client after 1.5
    for i, m in ipairs(clients) do
      assert.is_true(m:connected())
      assert.is_true(m:stats().connection.sent >= sent[i] + 2, "PINGREQ went out")
      assert.are.equal(0, m:stats().reconnects)
      assert.are.equal(0, m:stats().inbox)
      assert.are.same({ nil, "timeout: no message within 0.1 s" }, { m:receive(0.1) })
      m:disconnect()
    end
  end)
end)

-- A server made here that answers CONNECT with `script(peer)`: raw bytes, as a broker
-- would never send them.
local function hostile(transport, script)
  local url = transport == "ws" and "ws://127.0.0.1:0/" or "tcp://127.0.0.1:0"
  local s = assert(mw.listen(url, transport == "ws" and { protocols = { "mqtt" } } or { framing = "raw" }))
  local answered = {}
  s:on_message(function(peer)
    if answered[peer] then return end
    answered[peer] = true
    script(peer)
  end)
  return s:url()
end

local function send(peer, bytes) assert(peer:send(bytes, "binary")) end

local CONNACK = "\x20\x02\x00\x00"
local function publish(topic, payload)
  local body = string.pack(">s2", topic) .. payload
  assert(#body < 128)
  return "\x30" .. string.char(#body) .. body
end

for _, transport in ipairs { "ws", "tcp" } do
  describe("framing over " .. transport, function()
    it("takes several packets in one message and one packet across several", function()
      local url = hostile(transport, function(peer)
        -- CONNACK and two PUBLISH in one message...
        send(peer, CONNACK .. publish("a", "one") .. publish("b", "two"))
        -- ...then one PUBLISH of 300 bytes in three pieces, cut inside its two-byte length.
        local body = string.pack(">s2", "c") .. string.rep("x", 297)
        local whole = "\x30" .. "\xAC\x02" .. body
        assert(#body == 300)
        send(peer, whole:sub(1, 2))
        send(peer, whole:sub(3, 100))
        send(peer, whole:sub(101))
      end)
      local m = assert(mqtt.connect(url, { keepalive = 0 }))
      assert.are.equal("one", assert(m:expect("a", 5)).payload)
      assert.are.equal("two", assert(m:expect("b", 5)).payload)
      assert.are.equal(string.rep("x", 297), assert(m:expect("c", 5)).payload)
      m:disconnect()
    end)

    it("closes the connection on a remaining length longer than 4 bytes; the others go on", function()
      local bad = hostile(transport, function(peer) send(peer, CONNACK .. "\x30\xFF\xFF\xFF\xFF\x01") end)
      local m = assert(mqtt.connect(bad, { keepalive = 0 }))
      local err = m:wait("error", 5)
      assert.are.equal("MQTT: malformed remaining length (more than 4 bytes)", err)
      assert.are.same({ nil, err }, { m:publish("x", "y", { qos = 1 }) })
      -- The process goes on serving its other connections.
      local good = assert(mqtt.connect(TCP))
      local topic = fresh_topic("after")
      assert(good:subscribe(topic, 1))
      assert(good:publish(topic, "still here", { qos = 1 }))
      assert.are.equal("still here", assert(good:expect(topic, 5)).payload)
      good:disconnect()
    end)

    it("names the field: a topic length that runs past the PUBLISH", function()
      local bad = hostile(transport, function(peer) send(peer, CONNACK .. "\x30\x03\x01\x2C\x61") end)
      local m = assert(mqtt.connect(bad, { keepalive = 0 }))
      assert.are.equal("MQTT PUBLISH: topic name length 300 runs past the end of the packet (1 bytes left)",
        m:wait("error", 5))
    end)

    it("refuses a packet larger than max_packet before it arrives whole", function()
      local bad = hostile(transport, function(peer) send(peer, CONNACK .. "\x30\xFF\xFF\x7F") end)
      local m = assert(mqtt.connect(bad, { keepalive = 0, max_packet = 1024 }))
      assert.are.equal("MQTT: remaining length 2097151 is larger than max_packet (1024 bytes)", m:wait("error", 5))
    end)
  end)
end

describe("the broker stub over WebSocket (mqtt.broker)", function()
  it("routes by wildcard at QoS 0 and 1, keeps retained messages, tells who did what", function()
    local b = assert(mqtt.broker("ws://127.0.0.1:0/"))
    local seen = {}
    b:on_subscribe(function(_, filter, qos) seen[#seen + 1] = ("subscribe %s qos %d"):format(filter, qos) end)
    b:on_publish(function(msg) seen[#seen + 1] = ("publish %s %s"):format(msg.topic, msg.payload) end)
    b:publish("home/status", "up", { retain = true })
    local a = assert(mqtt.connect(b:url(), { client_id = "a" }))
    local five = assert(mqtt.connect(b:url(), { client_id = "five", version = 5 }))
    assert.are.equal(1, a:subscribe("home/#", 1))
    assert.are.equal(0, five:subscribe("home/+/temp"))
    assert.is_true(five:publish("home/kitchen/temp", "21", { qos = 1 }))
    assert.is_true(five:publish("home/door", "open", { qos = 2 }))
    local got = {}
    for msg in a:messages("home/#", 1) do
      got[#got + 1] = ("%s %s qos %d%s"):format(msg.topic, msg.payload, msg.qos, msg.retain and " retain" or "")
      if #got == 3 then break end
    end
    assert.are.same({ "home/status up qos 0 retain", "home/kitchen/temp 21 qos 1", "home/door open qos 1" }, got)
    local mine = assert(five:expect("home/kitchen/temp", 5))
    assert.are.equal(0, mine.qos, "delivered at the subscription's QoS")
    assert.are.same({ "a", "five" }, b:clients())
    assert.are.same({ "publish home/status up", "subscribe home/# qos 1", "subscribe home/+/temp qos 0",
      "publish home/kitchen/temp 21", "publish home/door open" }, seen)
    a:disconnect()
    five:disconnect()
  end)
end)

-- The packets of one TCP read, each whole (they are short: a one-byte length).
local function packets(chunk)
  local pos = 1
  return function()
    if pos > #chunk then return nil end
    local length = chunk:byte(pos + 1)
    assert(length < 128)
    local p = chunk:sub(pos, pos + 1 + length)
    pos = pos + 2 + length
    return p
  end
end

-- The wire, checked byte by byte by a server made here: what a reconnect sends again.
describe("in-flight retry on reconnect", function()
  it("sends an unacknowledged PUBLISH again with DUP and the same id, and a QoS 2 as PUBREL", function()
    local s = assert(mw.listen("tcp://127.0.0.1:0", { framing = "raw" }))
    local dials, seen = 0, {}
    s:on_connect(function() dials = dials + 1 end)
    s:on_message(function(peer, chunk) for bytes in packets(chunk) do
      local kind, flags = bytes:byte(1) >> 4, bytes:byte(1) & 15
      if kind == 1 then   -- CONNECT: the second time, the session is still here
        send(peer, dials == 1 and CONNACK or "\x20\x02\x01\x00")
      elseif kind == 3 then
        local topic, pos = string.unpack(">s2", bytes, 3)
        local id = string.unpack(">I2", bytes, pos)
        seen[#seen + 1] = ("%d PUBLISH %s id %d qos %d%s"):format(dials, topic, id, (flags >> 1) & 3,
          flags & 8 ~= 0 and " DUP" or "")
        -- The first time only the QoS 2 one is answered (PUBREC); the second time both.
        if topic == "two" then
          send(peer, "\x50\x02" .. string.pack(">I2", id))                             -- PUBREC
        elseif dials == 2 then
          send(peer, "\x40\x02" .. string.pack(">I2", id))                             -- PUBACK
        end
      elseif kind == 6 then
        local id = string.unpack(">I2", bytes, 3)
        seen[#seen + 1] = ("%d PUBREL id %d"):format(dials, id)
        if dials == 1 then
          peer:abort()                                                                    -- gone
        else
          send(peer, "\x70\x02" .. string.pack(">I2", id))                             -- PUBCOMP
        end
      end
    end end)
    local m = assert(mqtt.connect(s:url(), { keepalive = 0, reconnect = { initial = 0.05, jitter = 0 } }))
    local one = m:publish("one", "x", { qos = 1, wait = false })
    local two = m:publish("two", "y", { qos = 2, wait = false })
    local back = assert(m:wait("reconnect", 5))
    assert.is_true(back.session_present)
    assert.are.equal(2, back.resent)
    assert.is_true(m:flush(5))
    assert.are.same({
      ("1 PUBLISH one id %d qos 1"):format(one), ("1 PUBLISH two id %d qos 2"):format(two),
      ("1 PUBREL id %d"):format(two),
      ("2 PUBLISH one id %d qos 1 DUP"):format(one), ("2 PUBREL id %d"):format(two),
    }, seen)
    m:disconnect()
  end)

  it("delivers a QoS 2 message once, however often the broker sends it before PUBREL", function()
    local s = assert(mw.listen("ws://127.0.0.1:0/", { protocols = { "mqtt" } }))
    local acks = {}
    s:on_message(function(peer, bytes)
      local kind = bytes:byte(1) >> 4
      if kind == 1 then
        local body = string.pack(">s2I2", "q2", 7) .. "once"
        local first = "\x34" .. string.char(#body) .. body
        local dup = "\x3C" .. string.char(#body) .. body
        send(peer, CONNACK .. first .. dup .. dup)
      elseif kind == 5 then
        acks[#acks + 1] = "PUBREC"
        if #acks == 3 then send(peer, "\x62\x02\x00\x07" .. publish("end", "")) end    -- PUBREL 7
      elseif kind == 7 then
        acks[#acks + 1] = "PUBCOMP"
        send(peer, publish("done", ""))
      end
    end)
    local m = assert(mqtt.connect(s:url(), { keepalive = 0 }))
    assert.are.equal("once", assert(m:expect("q2", 5)).payload)
    assert(m:expect("end", 5))
    assert(m:expect("done", 5))
    assert.are.equal(0, m:stats().inbox, "delivered once")
    assert.are.same({ "PUBREC", "PUBREC", "PUBREC", "PUBCOMP" }, acks)
    m:disconnect()
  end)
end)

describe("misuse raises at the caller's line", function()
  it("names the argument", function()
    assert.has_error(function() mqtt.connect(TCP, { clientid = "x" }) end,
      "bad argument #2 to 'mqtt.connect' (unknown option 'opts.clientid')")
    local m = assert(mqtt.connect(TCP))
    local ok, err = pcall(m.subscribe, m, "a/#/b")
    assert.is_false(ok)
    assert.matches("^examples/protocols/mqtt_test.lua:%d+: bad argument #1 to 'm:subscribe' "
      .. "%(topic filter 'a/#/b': '#' must be a whole level, the last one%)$", err)
    assert.has_error(function() m:publish("a/+", "x") end)
    assert.has_error(function() m:publish("a", "x", { qos = 3 }) end,
      "bad argument #3 to 'm:publish' (qos: 0, 1 or 2 expected, got 3)")
    m:disconnect()
  end)
end)
