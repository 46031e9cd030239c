-- autobahn_server.lua: the echo server the Autobahn|Testsuite fuzzing client
-- tests moonwire's server side against (scripts/autobahn.sh --server). Every
-- message goes back to its sender with the same kind; permessage-deflate is
-- accepted when the client offers it; messages up to 64 MiB (the 9.* cases
-- move 16 MiB).
--   moonwire run examples/autobahn_server.lua [PORT]     PORT 0 (default): any free port
-- Prints `READY <port>` once listening; SIGTERM stops it.
local port = math.tointeger(tonumber(mw.args[1] or "0")) or error("PORT must be a whole number", 0)
local server = assert(mw.listen(("ws://127.0.0.1:%d/"):format(port), {
  compress = true,
  max_message = 64 * 1024 * 1024,
}))
server:on_message(function(peer, msg, kind) peer:send(msg, kind) end)
io.stdout:write("READY ", server:url():match(":(%d+)"), "\n")
io.stdout:flush()
