-- auto_reply.lua: answer the peer's application-level pings without ever
-- seeing them. Socket.IO's "2" gets "3" and graphql-transport-ws's
-- {"type":"ping"} gets {"type":"pong"} (rules of two strings: the exact bytes,
-- answered before the message reaches Lua); a JSON {"type": "ping"} spelled
-- any other way gets a pong from a rule with a function. Answered pings never
-- reach on_message or receive; stats().auto_replies counts them. The same
-- rules work for a client (mw.connect) and a server (mw.listen).
--   moonwire run examples/auto_reply.lua ws://127.0.0.1:8000/        as a client
--   moonwire run examples/auto_reply.lua listen ws://127.0.0.1:0/    as a server
-- Every other message is printed and answered with "echo: <message>"; one that
-- starts with "verdict" ends the session.
local rules = {
  { match = "2", reply = "3" },                               -- Socket.IO (Engine.IO v4)
  { match = '{"type":"ping"}', reply = '{"type":"pong"}' },   -- graphql-transport-ws
  {                                                           -- any other JSON ping
    match = function(msg)
      if not msg:find("^%s*{") then return false end
      local value = mw.json.decode(msg)
      return type(value) == "table" and value.type == "ping"
    end,
    reply = '{"type":"pong"}',
  },
}

-- Prints a message; echoes it, or ends the session on the verdict.
local function handle(conn, msg, finish)
  print("on_message", msg)
  if msg:find("^verdict") then
    print("answered " .. conn:stats().auto_replies .. " pings")
    finish()
  else
    conn:send("echo: " .. msg)
  end
end

if mw.args[1] == "listen" then
  local s = assert(mw.listen(mw.args[2] or "ws://127.0.0.1:0/", { auto_reply = rules }))
  print("listening on " .. s:url())
  s:on_message(function(peer, msg)
    handle(peer, msg, function() s:close() end)
  end)
else
  local c = mw.connect(mw.args[1] or "ws://127.0.0.1:8000/", { auto_reply = rules, reconnect = false })
  -- The same, one rule at a time after connecting (match as in c:expect):
  c:answer("^%s*%[%s*\"ping\"", '["pong"]')                   -- an array-framed ping
  c:on_message(function(conn, msg)
    handle(conn, msg, function() conn:close() end)
  end)
end
