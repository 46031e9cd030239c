-- The echo bot (bench/echo_bot/run.sh), moonwire's: every message arrives decoded by
-- the protobuf codec, gets hops + 1, and goes back encoded.
--   moonwire run bench/echo_bot/bot.lua URL [json]
-- With `json` as the second argument it speaks the same message as JSON text
-- (codec = "json") instead.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local url, format = mw.args[1], mw.args[2] or "protobuf"
local codec
if format == "json" then
  codec = "json"
else
  mw.protobuf.load(here .. "echo.proto")
  codec = mw.protobuf.codec("echo.Envelope")
end

local bot = mw.connect(url, { codec = codec, heartbeat = false, reconnect = false })
bot:on_message(function(c, env)
  env.hops = env.hops + 1
  c:send(env)
end)
bot:on_error(function(_, err) io.stderr:write("echo bot: ", err, "\n") mw.exit(1) end)
bot:on_close(function(_, code, reason, info)
  if info.by ~= "peer" then io.stderr:write("echo bot: closed ", code, " ", reason, "\n") mw.exit(1) end
end)
