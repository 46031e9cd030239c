-- echo_client.lua: connect, wait for the connection to open, then send and read
-- replies in plain top-down order (the main chunk is a coroutine, so it can wait).
--   moonwire run examples/echo_client.lua ws://127.0.0.1:9000/
local url = mw.args[1] or "ws://127.0.0.1:9000/"
local c = mw.connect(url)
assert(c:wait_open(5))

for i = 1, 3 do
  c:send("hello " .. i)
  local reply = assert(c:receive(2))
  print(reply)
end

-- Binary layouts with string.pack; the echo comes back as "binary" (expect can
-- wait for a message by its kind, skipping others).
c:send(string.pack(">I4s1", 42, "moon"), "binary")
local reply, kind = assert(c:expect(nil, { kind = "binary", timeout = 2 }))
local id, name = string.unpack(">I4s1", reply)
print(kind, id, name)

c:close(1000, "done")
