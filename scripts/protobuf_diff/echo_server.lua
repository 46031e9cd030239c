-- A chat.Envelope server for the `connect --proto` check in scripts/protobuf_diff.sh:
-- prints its URL, welcomes a login, echoes the rest; ends after its first peer leaves.
mw.protobuf.load("examples/chat.proto")
local server = assert(mw.listen("ws://127.0.0.1:0/chat", { codec = mw.protobuf.codec("chat.Envelope") }))
server:on_message(function(peer, env)
  if env.login then peer:send({ id = env.id, welcome = { user = env.login.user, session = -1 } })
  else peer:send(env) end
end)
server:on_close(function() server:close() end)
print(server:url())
io.stdout:flush()
