-- A Socket.IO server (mock) on require "moonwire.socketio": the default
-- namespace and /chat (which wants auth { token = "secret" }), events, acks
-- both ways, binary attachments, rooms, and Engine.IO pings that drop a client
-- that stops answering. Any Socket.IO v5 client speaking the WebSocket
-- transport talks to it (python-socketio with transports=["websocket"]; the
-- JavaScript client with transports: ["websocket"]).
--
--   moonwire run examples/socketio_mock.lua [PORT]      (prints "READY <port>")
local sio = require "moonwire.socketio"

local server = assert(sio.listen("ws://127.0.0.1:" .. (mw.args[1] or "0") .. "/",
  { ping_interval = 0.5, ping_timeout = 2 }))

server:on_connect(function(socket)
  socket:on("echo", function(...) socket:emit("echo", ...) end)
  socket:on("add", function(a, b) return a + b end)
  socket:on("reverse", function(data) return sio.binary(data:reverse()), #data end)
  socket:on("join", function(room)
    socket:join(room)
    return room
  end)
  socket:on("leave", function(room)
    socket:leave(room)
    return true
  end)
  socket:on("to_room", function(room, text) server:to(room):emit("room", room, text) end)
  -- Acks the other way: the server asks the client and waits for its answer.
  socket:on("ask", function(question)
    socket:emit("answer", (socket:call("question", question)))
  end)
  socket:on("kick", function() socket:disconnect() end)
end)

server:of("/chat"):on_connect(function(socket, auth)
  if auth.token ~= "secret" then return false, "not authorized" end
  socket:on("say", function(text)
    server:of("/chat"):emit("said", text)
    return "ok"
  end)
end)

print("READY " .. server:url():match(":(%d+)/"))
