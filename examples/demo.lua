-- demo.lua: a chat server and three bots in one process, no outside network.
-- The server picks a free port; each bot logs in, says hello and listens until
-- the last bot has spoken; then the server closes and the demo ends.
--   moonwire run examples/demo.lua
local server = assert(mw.listen("ws://127.0.0.1:0/chat", {
  codec = { encode = mw.json.encode, decode = mw.json.decode },
}))
local names = {}
server:on_message(function(peer, msg)
  if msg.op == "login" then
    names[peer.id] = msg.user
    peer:send({ op = "welcome" })
  elseif msg.op == "say" then
    server:broadcast({ op = "said", user = names[peer.id], text = msg.text })
  end
end)

local done = 0
local heard_self = {}                       -- heard_self[i]: bot i heard its own line
for i, name in ipairs({ "ann", "bob", "cy" }) do
  heard_self[i] = mw.future()
  mw.spawn(function()
    -- One after the other, so who hears whom is always the same: a bot joins once
    -- the one before it has heard its own line.
    if i > 1 then heard_self[i - 1]:wait() end
    local bot = mw.connect(server:url(), { codec = { encode = mw.json.encode, decode = mw.json.decode } })
    bot:send({ op = "login", user = name })  -- queued until the connection opens
    assert(bot:request({ op = "hello" }, function(m) return m.op == "welcome" end, 2))
    bot:send({ op = "say", text = "hi, I am " .. name })
    while true do
      local msg = assert(bot:receive(2))
      print(("%-3s hears %s: %s"):format(name, msg.user, msg.text))
      if msg.user == name then heard_self[i]:set(true) end
      if msg.user == "cy" then break end
    end
    bot:close()
    done = done + 1
    if done == 3 then server:close() end
  end)
end
