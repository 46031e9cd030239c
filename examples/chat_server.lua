-- chat_server.lua: a small JSON chat server. Every "say" goes to everyone;
-- peers that stay silent for 30 s are dropped.
--   moonwire run examples/chat_server.lua [ws://127.0.0.1:9000/chat]
local json = { encode = mw.json.encode, decode = mw.json.decode }
local server = assert(mw.listen(mw.args[1] or "ws://127.0.0.1:9000/chat",
  { codec = json, heartbeat = { timeout = 30 } }))

local names = {}

server:on_connect(function(peer)
  peer:send({ op = "hello", id = peer.id })
end)

server:on_message(function(peer, msg)
  if msg.op == "login" then
    names[peer.id] = msg.user
    peer:send({ op = "welcome", user = msg.user })
  elseif msg.op == "say" then
    server:broadcast({ op = "said", user = names[peer.id] or "?", text = msg.text })
  end
end)

server:on_close(function(peer)
  names[peer.id] = nil
end)

mw.log.info("chat server on %s", server:url())
return server
