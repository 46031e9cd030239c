-- resilient_bot.lua: a bot that survives its server going away. It logs in on
-- every open, keeps a heartbeat, and sends a counter every 50 ms whether the
-- connection is up or not: what it sends while down is queued and delivered,
-- in order, after the re-login. The example stops and restarts its own server,
-- which says goodbye with 1000 as servers do when they shut down for a restart:
-- a close the bot did not ask for, so it comes back. A close code from
-- `stop_codes` (or 1003, 1008) would end it for good.
--   moonwire run examples/resilient_bot.lua
local received, logins = {}, 0
local url = "ws://127.0.0.1:0/"                      -- any free port the first time
local function start_server()
  local s = assert(mw.listen(url))
  url = s:url()                                      -- the same port after a restart
  s:on_message(function(peer, msg)
    if msg == "login" then logins = logins + 1 else received[#received + 1] = tonumber(msg) end
  end)
  return s
end

local server = start_server()
local bot = mw.connect(url, {
  heartbeat = { interval = 0.5, timeout = 0.5 },
  reconnect = { initial = 0.05, factor = 2, max = 0.5, attempts = math.huge, stop_codes = { 4001 } },
})
bot:on_open(function(c, info)
  c:send("login")                                    -- goes before anything queued
  print(("open (reconnects: %d)"):format(info.reconnects))
end)
bot:on_close(function(c, code, reason, info)
  print(("closed %d by %s, will reconnect: %s"):format(code, info.by, tostring(info.will_reconnect)))
end)

local sent = 0
local sender = mw.every(0.05, function()
  sent = sent + 1
  assert(bot:send(tostring(sent)))
end)

mw.after(0.5, function()
  for _, peer in ipairs(server:peers()) do peer:close(1000, "restart") end
  server:close()                                     -- the server goes away...
  mw.after(0.4, function() server = start_server() end)   -- ...and comes back
end)

mw.after(1.6, function()
  sender:cancel()
  mw.after(0.3, function()
    local in_order = true
    for i, n in ipairs(received) do in_order = in_order and n == i end
    print(("logins %d, sent %d, received %d, all in order: %s"):format(logins, sent, #received, tostring(in_order)))
    bot:close()
    server:close()
  end)
end)
