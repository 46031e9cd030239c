-- edge_fuzz_server.lua: the WebSocket echo server scripts/edge_fuzz.py attacks.
-- 1 MiB messages, permessage-deflate accepted, 5 s to finish a handshake.
--   moonwire run bench/edge_fuzz_server.lua [PORT]     PORT 0 (default): any free port
-- Prints `READY <port>` once listening; counts what peers did on stderr at the end.
local port = math.tointeger(tonumber(mw.args[1] or "0")) or error("PORT must be a whole number", 0)
local server = assert(mw.listen(("ws://127.0.0.1:%d/"):format(port), {
  compress = true,
  max_message = 1024 * 1024,
  handshake_timeout = 5,
}))
local closes = {}
server:on_message(function(peer, msg, kind) peer:send(msg, kind) end)
server:on_close(function(peer, code)
  closes[code] = (closes[code] or 0) + 1
end)
mw.every(10, function()
  local parts = {}
  for code, n in pairs(closes) do parts[#parts + 1] = ("%d×%d"):format(n, code) end
  table.sort(parts)
  mw.log.info("closes so far: %s; Lua heap %.0f KiB", table.concat(parts, " "), collectgarbage("count"))
end)
io.stdout:write("READY ", server:url():match(":(%d+)"), "\n")
io.stdout:flush()
