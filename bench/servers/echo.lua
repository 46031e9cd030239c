-- echo.lua: moonwire's own WebSocket echo server for the benchmarks; every
-- message goes back to its sender with the same kind.
--   moonwire run bench/servers/echo.lua [PORT [HOST]]     PORT 0 (default): any free port
-- Prints `READY <port> <url>` once listening; SIGTERM stops it.
local port = math.tointeger(tonumber(mw.args[1] or "0")) or error("PORT must be a whole number", 0)
local host = mw.args[2] or "127.0.0.1"
local server = assert(mw.listen(("ws://%s:%d/"):format(host, port), {
  max_message = 256 * 1048576,
  -- An echo must not lose what a client sends faster than it reads the echoes
  -- (pipelined, drained): a budget no benchmark reaches, as before budgets existed.
  queue = { limit = 1 << 40, bytes = 1 << 40 },
}))
server:on_message(function(peer, msg, kind) peer:send(msg, kind) end)
io.stdout:write("READY ", server:url():match(":(%d+)"), " ", server:url(), "\n")
io.stdout:flush()
