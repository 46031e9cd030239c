-- protocol_test.lua: a protocol regression suite, run by `moonwire test`.
-- It starts its own server (the chat server of examples/chat_server.lua plus a
-- few fault-injecting ones), so it needs no outside network.
--   moonwire test examples/tests
local json = { encode = mw.json.encode, decode = mw.json.decode }

describe("chat protocol", function()
  local server, url

  setup(function()
    server = assert(mw.listen("ws://127.0.0.1:0/chat", { codec = json }))
    server:on_message(function(peer, msg)
      if msg.op == "login" then
        peer:send({ op = "welcome", user = msg.user })
      elseif msg.op == "echo" then
        peer:send(msg)
      elseif msg.op == "quit" then
        peer:close(4000, "bye " .. msg.user)
      end
    end)
    url = server:url()
  end)

  teardown(function() server:close() end)

  it("welcomes a login", function()
    local c = mw.connect(url, { codec = json })
    local reply = assert(c:request({ op = "login", user = "ann" }, function(m) return m.op == "welcome" end, 2))
    assert.are.same({ op = "welcome", user = "ann" }, reply)
  end)

  it("keeps handlers and inboxes per connection", function()
    local a = mw.connect(url, { codec = json })
    local b = mw.connect(url, { codec = json })
    local seen_by_a = {}
    a:on_message(function(_, msg) seen_by_a[#seen_by_a + 1] = msg.n end)
    assert(b:wait_open(2))
    b:send({ op = "echo", n = 2 })
    assert.are.equal(2, assert(b:receive(2)).n)  -- b has no handler: its inbox
    assert(b:request({ op = "echo", n = 3 }, function(m) return m.n == 3 end, 2))
    a:send({ op = "echo", n = 1 })
    -- Echoes come back in order: once 4 is here, 1 went to a's handler.
    assert(a:request({ op = "echo", n = 4 }, function(m) return m.n == 4 end, 2))
    assert.are.same({ 1 }, seen_by_a)
  end)

  it("echoes in order", function()
    local c = mw.connect(url, { codec = json })
    for i = 1, 5 do c:send({ op = "echo", n = i }) end
    for i = 1, 5 do assert.are.equal(i, assert(c:receive(2)).n) end
  end)

  it("closes with the code the protocol says", function()
    local c = mw.connect(url, { codec = json, reconnect = false })
    local code, reason
    c:on_close(function(_, c_code, c_reason) code, reason = c_code, c_reason end)
    c:send({ op = "quit", user = "bob" })
    assert.are.same({ nil, "closed" }, { c:receive(2) })
    assert.are.equal(4000, code)
    assert.are.equal("bye bob", reason)
  end)
end)

describe("binary format", function()
  it("round-trips a packed header", function()
    local server = assert(mw.listen("ws://127.0.0.1:0/"))
    server:on_message(function(peer, msg)
      local kind, seq, body = string.unpack(">BI4s2", msg)
      peer:send(string.pack(">BI4s2", kind + 1, seq, body:reverse()), "binary")
    end)
    local c = mw.connect(server:url())
    c:send(string.pack(">BI4s2", 1, 4242, "moon"), "binary")
    local reply, kind = assert(c:receive(2))
    assert.are.equal("binary", kind)
    local k, seq, body = string.unpack(">BI4s2", reply)
    assert.are.same({ 2, 4242, "noom" }, { k, seq, body })
    server:close()
  end)

  -- Small messages sent in one go share one write; larger ones and pings go on
  -- their own. Whatever the mix, the peer gets every message whole, in order.
  it("delivers a burst of mixed sizes whole and in order", function()
    local server = assert(mw.listen("ws://127.0.0.1:0/"))
    server:on_message(function(peer, msg, kind) peer:send(msg, kind) end)
    local c = mw.connect(server:url())
    assert(c:wait_open(2))
    local sizes = { 1, 4096, 4097, 10, 70000, 0, 65536, 3, 200000, 4095, 17 }
    local sent = {}
    for i, size in ipairs(sizes) do
      local body = string.pack(">I4", i) .. string.rep(string.char(65 + i), size)
      sent[i] = body
      c:send(body, i % 2 == 0 and "text" or "binary")
      if i == 5 then c:ping() end
    end
    for i = 1, #sizes do
      local got, kind = assert(c:receive(5))
      assert.are.equal(i % 2 == 0 and "text" or "binary", kind)
      assert.are.equal(#sent[i], #got)
      assert.is_true(got == sent[i], "message " .. i .. " arrived changed")
    end
    c:close()
    server:close()
  end)
end)

describe("the client under faults", function()
  it("sees an aborted connection as 1006 by network", function()
    local server = assert(mw.listen("ws://127.0.0.1:0/"))
    server:on_message(function(peer) peer:abort() end)
    local c = mw.connect(server:url(), { reconnect = false })
    local info
    c:on_close(function(_, code, _, i) info = { code = code, by = i.by } end)
    c:send("please abort")
    assert.are.same({ nil, "closed" }, { c:receive(2) })
    assert.are.same({ code = 1006, by = "network" }, info)
    server:close()
  end)

  it("detects a peer that stops answering pings", function()
    local server = assert(mw.listen("ws://127.0.0.1:0/"))
    server:on_connect(function(peer) peer:pause(5) end)
    local c = mw.connect(server:url(), { heartbeat = { interval = 0.2, timeout = 0.2 }, reconnect = false })
    assert(c:wait_open(2))
    local started = mw.now()
    assert.are.same({ nil, "closed" }, { c:receive(3) })
    assert.is_true(mw.now() - started < 0.2 + 0.2 + 0.5)
    server:close()
  end)

  it("fails a connection that sends a bad frame with 1002", function()
    local server = assert(mw.listen("ws://127.0.0.1:0/"))
    server:on_message(function(peer) peer:send_raw("\x83\x00") end)   -- opcode 3 is reserved
    local c = mw.connect(server:url(), { reconnect = false })
    local code, err
    c:on_error(function(_, e) err = e end)
    c:on_close(function(_, c_code) code = c_code end)
    c:send("send me garbage")
    assert.are.same({ nil, "closed" }, { c:receive(2) })
    assert.are.equal(1002, code)
    assert.truthy(err:find("^protocol:"))
    server:close()
  end)

  it("retries refused handshakes, then opens", function()
    local server = assert(mw.listen("ws://127.0.0.1:0/"))
    server:reject_next(2, 503)
    local c = mw.connect(server:url(), { reconnect = { initial = 0.02, factor = 1, jitter = 0 } })
    local errors = {}
    c:on_error(function(_, e) errors[#errors + 1] = e end)
    assert(c:wait_open(2))
    assert.are.equal(2, #errors)
    assert.truthy(errors[1]:find("503"))
    server:close()
  end)

  it("stops on 401", function()
    local server = assert(mw.listen("ws://127.0.0.1:0/"))
    server:reject_next(1, 401)
    local c = mw.connect(server:url(), { reconnect = { initial = 0.02 } })
    local ok, err = c:wait_open(2)
    assert.is_nil(ok)
    assert.truthy(err:find("401"))
    assert.are.equal("closed", c:state())
    server:close()
  end)
end)

describe("the send queue", function()
  it("carries what waited for a full socket over a reconnect, whole and in order", function()
    local s = assert(mw.listen("ws://127.0.0.1:0/"))
    local first, got = nil, {}
    s:on_connect(function(peer)
      if not first then
        first = peer
        peer:pause(30)   -- reads nothing: the client's socket fills, its sends wait in the queue
      end
    end)
    s:on_message(function(_, msg) got[#got + 1] = msg end)
    local c = mw.connect(s:url(), { kind = "binary", reconnect = { initial = 0.05, jitter = 0, attempts = 5 } })
    assert(c:wait_open(5))
    local n = 0
    while c:stats().queued < 20 do
      n = n + 1
      assert(c:send(string.pack(">I4", n) .. string.rep("x", 65536)))
    end
    local waiting = c:stats().queued
    first:abort()    -- what the socket took is lost with it; the queue waits for the next connection
    local deadline = mw.now() + 10
    while #got < waiting and mw.now() < deadline do mw.sleep(0.02) end
    assert.are.equal(waiting, #got)
    for i, msg in ipairs(got) do
      assert.are.equal(65540, #msg)
      assert.are.equal(n - waiting + i, string.unpack(">I4", msg))
    end
    c:close()
    s:close()
  end)
end)
