-- chat_session.lua: one short session with examples/chat_server.lua, the kind
-- of conversation worth recording once and replaying as a regression test.
--   moonwire run examples/chat_server.lua ws://127.0.0.1:9000/chat &
--   moonwire run --record session.jsonl examples/chat_session.lua ws://127.0.0.1:9000/chat
--   moonwire replay session.jsonl --generate-test --ignore id -o session_test.lua
--   moonwire test session_test.lua
local json = { encode = mw.json.encode, decode = mw.json.decode }
local c = mw.connect(mw.args[1] or "ws://127.0.0.1:9000/chat", { codec = json, reconnect = false })

local hello = assert(c:receive(5))
print("hello from the server, I am peer " .. hello.id)
local welcome = assert(c:request({ op = "login", user = "ann" }, function(m) return m.op == "welcome" end, 5))
print("welcome, " .. welcome.user)
local said = assert(c:request({ op = "say", text = "hi" }, function(m) return m.op == "said" end, 5))
print(said.user .. " said " .. said.text)
c:close()
