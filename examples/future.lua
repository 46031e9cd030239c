-- future.lua: mw.future, a value set once that coroutines wait for. The first
-- of two events decides (the peer's answer, or the close), and two coroutines
-- wait for the same answer.
--   moonwire run examples/future.lua
local server = assert(mw.listen("ws://127.0.0.1:0/"))
server:on_message(function(peer, msg)
  mw.after(0.05, function() peer:send("pong " .. msg) end)  -- answers a moment later
end)

local c = mw.connect(server:url())
local reply = mw.future("the reply")
c:on_message(function(_, msg) reply:set(msg) end)           -- the first set wins
c:on_close(function(_, code) reply:set(nil, "closed with " .. code) end)
assert(c:wait_open(5))
c:send("ping")

mw.spawn(function()
  print("watcher:", reply:wait())                           -- a second waiter
end)
print("main:", reply:wait(5))                               -- 5 s at most
print("later:", reply:wait())                               -- set already: at once
print("set again:", reply:set("other"))                     -- false: the first values stay

local never = mw.future()
print("timeout:", never:wait(0.05))                         -- nil  timeout
print("is set:", never:is_set())
c:close()
server:close()
