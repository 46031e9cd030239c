-- ws_framing.lua: a framing function on a WebSocket connection, shown with MQTT
-- 3.1.1 written by hand on string.pack (to speak MQTT, require "moonwire.mqtt", as
-- mqtt_ws.lua does): CONNECT/CONNACK, SUBSCRIBE/SUBACK, PUBLISH at QoS 0 and 1
-- (with PUBACK both ways), DISCONNECT.
-- MQTT over WebSocket may put several packets in one WebSocket message and one
-- packet across several: a framing function cuts the messages' bytes into
-- packets, and a codec turns each packet into a table, so c:expect can wait for a
-- packet by its fields.
--
--   moonwire run examples/ws_framing.lua ws://127.0.0.1:8080/ [topic]
-- (mosquitto: `listener 8080` + `protocol websockets` + `allow_anonymous true`)
local url = mw.args[1] or "ws://127.0.0.1:8080/"
local topic = mw.args[2] or "moonwire/example"

local CONNECT, CONNACK, PUBLISH, PUBACK, SUBSCRIBE, SUBACK, DISCONNECT = 1, 2, 3, 4, 8, 9, 14
local names = { [CONNACK] = "CONNACK", [PUBLISH] = "PUBLISH", [PUBACK] = "PUBACK", [SUBACK] = "SUBACK" }

-- The remaining length: 7 bits a byte, least significant first.
local function varint(n)
  local out = {}
  repeat
    local byte = n % 128
    n = n // 128
    out[#out + 1] = string.char(n > 0 and byte + 128 or byte)
  until n == 0
  return table.concat(out)
end

local function packet(kind, flags, body)
  return string.char(kind << 4 | flags) .. varint(#body) .. body
end

local mqtt = {}

function mqtt.encode(p)
  if p.type == "CONNECT" then
    local header = string.pack(">s2BBI2", "MQTT", 4, 0x02, p.keepalive or 60) -- level 4 = 3.1.1, clean session
    return packet(CONNECT, 0, header .. string.pack(">s2", p.client_id))
  elseif p.type == "SUBSCRIBE" then
    return packet(SUBSCRIBE, 2, string.pack(">I2s2B", p.id, p.topic, p.qos or 0))
  elseif p.type == "PUBLISH" then
    local qos = p.qos or 0
    local id = qos > 0 and string.pack(">I2", p.id) or ""
    return packet(PUBLISH, qos << 1, string.pack(">s2", p.topic) .. id .. p.payload)
  elseif p.type == "PUBACK" then
    return packet(PUBACK, 0, string.pack(">I2", p.id))
  elseif p.type == "DISCONNECT" then
    return packet(DISCONNECT, 0, "")
  end
  error("cannot encode MQTT packet " .. tostring(p.type))
end

-- Where the first packet in `buffer` ends: the type byte, the remaining length
-- (7 bits a byte, least significant first), the rest. Returns the packet and its
-- size, or nothing until the whole packet is there.
function mqtt.packet(buffer)
  local length, shift, pos = 0, 0, 2
  repeat
    local byte = buffer:byte(pos)
    if not byte then return nil end
    length, shift, pos = length | (byte & 127) << shift, shift + 7, pos + 1
  until byte < 128
  local size = pos - 1 + length
  if #buffer < size then return nil end
  return buffer:sub(1, size), size, pos
end

function mqtt.decode(bytes)
  local first = bytes:byte(1)
  local kind, flags = first >> 4, first & 0x0f
  local _, _, pos = mqtt.packet(bytes)
  local p = { type = names[kind] or kind }
  if kind == CONNACK then
    p.session_present, p.code = string.unpack("BB", bytes, pos)
  elseif kind == SUBACK then
    p.id, p.granted = string.unpack(">I2B", bytes, pos)
  elseif kind == PUBACK then
    p.id = string.unpack(">I2", bytes, pos)
  elseif kind == PUBLISH then
    p.qos = (flags >> 1) & 3
    p.topic, pos = string.unpack(">s2", bytes, pos)
    if p.qos > 0 then p.id, pos = string.unpack(">I2", bytes, pos) end
    p.payload = bytes:sub(pos)
  end
  return p
end

-- "mqtt" is the subprotocol MQTT over WebSocket requires; every send is binary.
local c = mw.connect(url, { protocols = { "mqtt" }, kind = "binary", framing = mqtt.packet, codec = mqtt })

c:send({ type = "CONNECT", client_id = "moonwire-" .. math.random(1 << 30) }) -- queued until open
local ack = assert(c:expect({ type = "CONNACK" }, 10))
print("CONNACK", ack.code)

c:send({ type = "SUBSCRIBE", id = 1, topic = topic, qos = 1 })
print("SUBACK", assert(c:expect({ type = "SUBACK", id = 1 }, 10)).granted)

c:send({ type = "PUBLISH", topic = topic, payload = "hello at QoS 0" })
local m = assert(c:expect({ type = "PUBLISH", payload = "hello at QoS 0" }, 10))
print("PUBLISH", m.topic, m.payload, "qos " .. m.qos)

-- QoS 1: the broker acknowledges ours, and delivers it back with an id of its
-- own that we acknowledge. Either may come first: expect finds each.
c:send({ type = "PUBLISH", topic = topic, payload = "hello at QoS 1", qos = 1, id = 2 })
print("PUBACK", assert(c:expect({ type = "PUBACK", id = 2 }, 10)).id)
m = assert(c:expect({ type = "PUBLISH", payload = "hello at QoS 1" }, 10))
print("PUBLISH", m.topic, m.payload, "qos " .. m.qos)
c:send({ type = "PUBACK", id = m.id })

c:send({ type = "DISCONNECT" })
c:close()
