-- moonwire.socketio keeps its session across a restart of the server: run
-- by scripts/protocols/socketio.sh, which kills the python-socketio server once
-- this script printed "joined", and starts it again on the same port. The
-- module dials again, re-joins "/" and "/chat" (with its auth), says so in
-- on_reconnect, and sends what was emitted while the server was down.
--
--   moonwire run examples/protocols/socketio_reconnect.lua http://127.0.0.1:PORT
local sio = require "moonwire.socketio"

local url = mw.args[1] or os.getenv("SOCKETIO_URL") or "http://127.0.0.1:8000"
local socket = sio.connect(url, { reconnect = { initial = 0.1, max = 0.5, attempts = 100 } })
-- auth as a function: asked again at every (re)join, so a token can be renewed.
local auth_asked = 0
local chat = socket:of("/chat", { auth = function()
  auth_asked = auth_asked + 1
  return { token = "secret" }
end })

local rejoined = {}
for _, s in ipairs { socket, chat } do
  s:on_disconnect(function(_, why, will_reconnect) print("disconnected", s.namespace, why, will_reconnect) end)
  s:on_reconnect(function(_, info)
    rejoined[#rejoined + 1] = s.namespace
    print("reconnected", s.namespace, "after reconnects: " .. info.reconnects)
  end)
end

assert(socket:wait_connected(10))
assert(chat:wait_connected(10))
print("joined", socket.id, chat.id)
io.stdout:flush()

-- The server goes away: waiting for an event ends with the disconnect.
local ok, err = socket:expect("never")
print("waiting ended:", ok, err)
assert(err == "disconnected: transport close", err)

-- Emitted while the server is down: held, sent once "/" is joined again.
assert(socket:emit("echo", "sent while down"))

assert(socket:wait_connected(30))
assert(chat:wait_connected(30))
print("rejoined", table.concat(rejoined, " "))
print("auth asked " .. auth_asked .. " times")
assert(#rejoined == 2, "both namespaces re-joined")

print("echo", assert(socket:expect("echo", 5)))
print("chat", assert(chat:call("say", "back again")), assert(chat:expect("said", 5)))
socket:close()
print("done")
