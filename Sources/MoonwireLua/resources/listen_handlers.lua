-- `moonwire listen URL --script FILE`: the server is the command's own (it prints
-- every event, echoes, relays and reads input); this hands its events on to
-- FILE's handlers: on_connect(peer, request), on_message(peer, msg, kind),
-- on_close(peer, code, reason), defined as globals or in a table FILE returns.
-- Called with the server; returns the main chunk, which runs FILE with the
-- server as its `...`.
local server = ...

return function(file)
  local chunk, problem = loadfile(file)
  if not chunk then error(problem, 0) end
  local returned = chunk(server)
  local handlers = type(returned) == "table" and returned or _G
  server:on_connect(function(peer, request)
    if handlers.on_connect then handlers.on_connect(peer, request) end
  end)
  server:on_message(function(peer, msg, kind)
    if handlers.on_message then handlers.on_message(peer, msg, kind) end
  end)
  server:on_close(function(peer, code, reason)
    if handlers.on_close then handlers.on_close(peer, code, reason) end
  end)
end
