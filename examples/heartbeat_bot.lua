-- A JSON bot whose heartbeat is an application message: {"type":"ping"} goes
-- out after 50 ms of silence, and the server's answer is consumed by the
-- heartbeat (reply = fn) instead of reaching on_message, receive or request.
-- Against an echo server the answer is the ping itself.
--
--   moonwire run examples/heartbeat_bot.lua ws://127.0.0.1:9000/
local url = mw.args[1] or "ws://127.0.0.1:9000/"

local probes, leaked = 0, 0
local c
c = mw.connect(url, {
  reconnect = false,
  codec = { encode = mw.json.encode, decode = mw.json.decode },
  heartbeat = {
    interval = 0.05,
    timeout = 10,
    message = function()
      probes = probes + 1
      -- A probe goes out only once the previous one was answered: on the
      -- fourth, three replies have come back and were consumed.
      if probes == 4 then
        mw.spawn(function()
          local reply = assert(c:request({ type = "data", n = 1 }, { type = "data" }, 10))
          print("data", reply.n, c:receive(0))
          print("heartbeat replies seen by on_message:", leaked, "rtt measured:", c:stats().last_rtt ~= nil)
          c:close()
        end)
      end
      return mw.json.encode({ type = "ping", n = probes })
    end,
    reply = function(msg) return msg.type == "ping" end,
  },
})
c:on_message(function(_, msg)
  if msg.type == "ping" then leaked = leaked + 1 end
end)
