-- listen_greeter.lua: handlers for `moonwire listen --script`, which prints every
-- event and then calls these. Greets each peer; "who" asks how many are connected.
--   moonwire listen --script examples/listen_greeter.lua 9000
local server = ...

function on_connect(peer, request)
  peer:send("welcome, you are " .. peer.id)
end

function on_message(peer, msg, kind)
  if msg == "who" then peer:send(#server:peers() .. " connected") end
end
