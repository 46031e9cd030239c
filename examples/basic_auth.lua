-- basic_auth.lua: a user name and password in a WebSocket URL go to the server as
-- HTTP Basic authentication (an Authorization header), as Python websockets and
-- node's ws send them. The server here checks that header itself and closes
-- anyone else with 1008; a server of yours may refuse the handshake with 401.
--   moonwire run examples/basic_auth.lua
local expected = "Basic " .. mw.base64("ann:s@cret")

local server = assert(mw.listen("ws://127.0.0.1:0/"))
server:on_connect(function(peer, request)
  if request.headers.authorization == expected then
    peer:send("welcome, ann")
  else
    peer:close(1008, "who are you?")
  end
end)

-- The "@" of the password is percent-encoded, as in any URL.
local function visit(credentials)
  local url = "ws://" .. credentials .. "@" .. server:url():sub(#"ws://" + 1)
  local who = credentials:match("^[^:]*")
  local c = mw.connect(url, { reconnect = false })
  c:on_close(function(_, code, reason)
    if code ~= 1000 then print(("%s: closed %d %s"):format(who, code, reason)) end
  end)
  local answer = c:receive(5)
  if answer then print(who .. ": " .. answer) end
  c:close()
end

visit("ann:s%40cret")
visit("bob:guess")
server:close()
