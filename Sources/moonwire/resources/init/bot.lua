-- bot.lua: a starter bot, written by moonwire init. It connects, logs in on every
-- open (again after each reconnect), and answers what the server says.
--   moonwire run bot.lua ws://127.0.0.1:9000/
-- Without a URL it starts an echo server of its own, so it runs as it is.
local greeting = require("greeting")

local url = mw.args[1]
local server
if not url then
  server = assert(mw.listen("ws://127.0.0.1:0/"))
  server:on_message(function(peer, msg) peer:send(msg) end)
  url = server:url()
end

local c = mw.connect(url, { reconnect = { attempts = math.huge, max = 10 } })
c:on_open(function(conn, info)
  conn:send(greeting.hello("moonwire"))
  mw.log.info("open, reconnects: %d", info.reconnects)
end)
c:on_close(function(_, code, reason, info)
  mw.log.info("closed %d %s, will reconnect: %s", code, reason, tostring(info.will_reconnect))
end)

local reply = assert(c:expect(greeting.is_reply, 5))
print(reply)
c:close()
if server then server:close() end
