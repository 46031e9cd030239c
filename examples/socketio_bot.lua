-- A Socket.IO bot on require "moonwire.socketio": joins the default namespace
-- and /chat (with an auth payload), emits an event and gets one back, calls
-- the server with an ack and waits for it, sends bytes as a binary attachment
-- and gets them back in a binary ack, answers the server's own ack request
-- from a handler's return value, and leaves. The Engine.IO pings ("2") are
-- answered by the module; the bot never sees them.
--
--   moonwire run examples/socketio_bot.lua http://127.0.0.1:8000
--   (or SOCKETIO_URL=http://127.0.0.1:8000 moonwire run examples/socketio_bot.lua)
local sio = require "moonwire.socketio"

local url = mw.args[1] or os.getenv("SOCKETIO_URL") or "http://127.0.0.1:8000"
local socket = sio.connect(url, { reconnect = false })

-- The server asks us a question and waits for our ack: the return value is the answer.
socket:on("question", function(q) return "42 is the answer to " .. q end)

assert(socket:wait_connected(10))
print("connected to / as " .. socket.id)

socket:emit("echo", "hello", 1, { nested = true })
local text, n, t = assert(socket:expect("echo", 5))
print("echo", text, n, t.nested)

print("add", assert(socket:call("add", 2, 3)))

local reversed, length = assert(socket:call("reverse", sio.binary("\1\2\3\255")))
print("reverse", mw.hex(reversed), length)

socket:emit("ask", "life")
print("answer", assert(socket:expect("answer", 5)))

local chat = socket:of("/chat", { auth = { token = "secret" } })
assert(chat:wait_connected(10))
print("chat", assert(chat:call("say", "hi all")), assert(chat:expect("said", 5)))

socket:close()
print("done")
