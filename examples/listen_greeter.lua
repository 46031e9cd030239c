-- listen_greeter.lua: handlers for `moonwire listen --script`, which prints every
-- event and then calls these. Greets each peer; "who" asks how many are connected.
--   moonwire listen --script examples/listen_greeter.lua 9000
-- The handlers may also be globals; a table returned keeps them local.
local server = ...
local handlers = {}

function handlers.on_connect(peer, request)
  peer:send("welcome, you are " .. peer.id)
end

function handlers.on_message(peer, msg, kind)
  if msg == "who" then peer:send(#server:peers() .. " connected") end
end

return handlers
