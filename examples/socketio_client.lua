-- A Socket.IO v4 client over a plain WebSocket: the Engine.IO open packet,
-- the namespace connect ("40"), an event out and one back, and an event with
-- an acknowledgement id answered by the server's ack. Engine.IO pings ("2")
-- are answered ("3") by auto_reply, without reaching the script.
--
-- ready = "manual": an event emitted before the namespace connect stays
-- queued after the socket opens (the server would drop it), the handshake goes
-- past the queue with c:send_now, and c:ready() releases the queue in order.
--
--   moonwire run examples/socketio_client.lua ws://127.0.0.1:8000/
local base = mw.args[1] or "ws://127.0.0.1:8000/"
local c = mw.connect(base .. "socket.io/?EIO=4&transport=websocket", {
  reconnect = false, ready = "manual", auto_reply = { match = "2", reply = "3" },
})

local function emit(event, ...)
  c:send("42" .. mw.json.encode(mw.json.array({ event, ... })))
end

emit("chat", "hello") -- queued now, sent after c:ready()
c:on_ready(function() print("ready: the queue goes out") end)

-- Engine.IO: the server speaks first, with its settings.
local open = mw.json.decode(assert(c:expect("^0{", 10)):sub(2))
print("engine.io open, ping every " .. open.pingInterval .. " ms")

-- Socket.IO: connect to the default namespace before any event.
c:send_now("40")
local connected = mw.json.decode(assert(c:expect("^40", 10)):sub(3))
print("connected, sid is a " .. type(connected.sid))
c:ready()

-- An event with an ack id: "42<id>[...]" out, "43<id>[...]" back.
local last_id = 0
local function call(event, ...)
  last_id = last_id + 1
  local id = tostring(last_id)
  c:send("42" .. id .. mw.json.encode(mw.json.array({ event, ... })))
  local ack = assert(c:expect("^43" .. id .. "%[", 10))
  return table.unpack(mw.json.decode(ack:sub(3 + #id)))
end

local event = mw.json.decode(assert(c:expect('^42%["chat"', 10)):sub(3))
print("event", event[1], event[2])

print("ack", call("add", 2, 3))
print("ack", call("add", 40, 2))

print("state", c:state())
c:send("41") -- leave the namespace
c:close()
