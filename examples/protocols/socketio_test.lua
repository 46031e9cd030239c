-- moonwire.socketio against the real python-socketio server
-- (scripts/protocols/socketio_server.py, started by scripts/protocols/socketio.sh):
-- the Engine.IO handshake and its pings, events, acks both ways, binary
-- attachments, namespaces with auth, rooms, a server-side disconnect, and a
-- hostile server whose malformed packets close that connection in words.
--
--   SOCKETIO_URL=http://127.0.0.1:PORT moonwire test examples/protocols/socketio_test.lua
local sio = require "moonwire.socketio"

local url = os.getenv("SOCKETIO_URL") or "http://127.0.0.1:8000"

local function connect(opts)
  opts = opts or {}
  opts.reconnect = false
  local s = sio.connect(url, opts)
  assert(s:wait_connected(5))
  return s
end

describe("socket.io client against python-socketio", function()
  it("reads the Engine.IO open packet and joins the default namespace", function()
    local s = connect()
    assert.is_string(s.id)
    assert.is_string(s.client.sid)
    assert.are.equal(1000, s.client.ping_interval)
    assert.are.equal(5000, s.client.ping_timeout)
    assert.is_true(s:connected())
    s:close()
  end)

  it("derives the WebSocket URL from http:// and ws:// forms", function()
    assert.are.equal("ws://h:1/socket.io/?EIO=4&transport=websocket", (sio._engine_url("http://h:1", {})))
    assert.are.equal("wss://h/socket.io/?EIO=4&transport=websocket", (sio._engine_url("https://h/", {})))
    local u, nsp = sio._engine_url("http://h:1/chat?x=1", {})
    assert.are.equal("ws://h:1/socket.io/?x=1&EIO=4&transport=websocket", u)
    assert.are.equal("/chat", nsp)
    assert.are.equal("ws://h:1/socket.io/?EIO=4&transport=websocket",
      (sio._engine_url("ws://h:1/socket.io/?EIO=4&transport=websocket", {})))
  end)

  it("emits an event and gets one back, nil as null", function()
    local s = connect()
    assert(s:emit("echo", "hello", 7, nil, { deep = { list = { 1, 2 } } }))
    local text, n, null, t = s:expect("echo", 5)
    assert.are.equal("hello", text)
    assert.are.equal(7, n)
    assert.are.equal(mw.json.null, null)
    assert.are.same({ 1, 2 }, t.deep.list)
    s:close()
  end)

  it("waits for an ack (call) and takes one in a callback (emit)", function()
    local s = connect()
    assert.are.equal(5, s:call("add", 2, 3))
    local got
    assert(s:emit("add", 40, 2, function(sum) got = sum end))
    -- The callback runs before the next event the server sends after the ack.
    s:emit("echo", "after")
    assert(s:expect("echo", 5))
    assert.are.equal(42, got)
    s:close()
  end)

  it("times out a call the server never answers", function()
    local s = connect()
    local ok, err = s:timeout(0.3):call("nobody_handles_this")
    assert.is_nil(ok)
    assert.are.equal("timeout", err)
    assert.are.equal(0, s:stats().pending_acks)
    s:close()
  end)

  it("sends bytes as an attachment and gets a binary ack", function()
    local s = connect()
    local bytes = "\0\1\2\255\254 not utf8 \200"
    local reversed, length = s:call("reverse", sio.binary(bytes))
    assert.are.equal(bytes:reverse(), reversed)
    assert.are.equal(#bytes, length)
    -- A string that is not UTF-8 goes as binary on its own.
    assert.are.equal("\255\1", (s:call("reverse", "\1\255")))
    s:close()
  end)

  it("receives an event with two attachments", function()
    local s = connect()
    s:emit("blob", 300)
    local obj, tail = s:expect("blob", 5)
    assert.are.equal("blob", obj.name)
    assert.are.equal(300, #obj.data)
    assert.are.equal("\0\1\2", obj.data:sub(1, 3))
    assert.are.equal("\0\255", tail)
    s:close()
  end)

  it("answers the server's ack request with the handler's return values", function()
    local s = connect()
    s:on("question", function(q) return "the answer to " .. q end)
    s:emit("ask", "everything")
    assert.are.equal("the answer to everything", s:expect("answer", 5))
    s:close()
  end)

  it("joins a namespace with an auth payload, and hears a refusal in words", function()
    local s = connect()
    local chat = s:of("/chat", { auth = { token = "secret" } })
    assert(chat:wait_connected(5))
    assert.are.equal("ok", chat:call("say", "hi"))
    assert.are.equal("hi", chat:expect("said", 5))

    local refused_with
    local bad = sio.connect(url, { namespace = "/chat", auth = { token = "wrong" }, reconnect = false })
    bad:on_connect_error(function(_, err) refused_with = err end)
    local ok, err = bad:wait_connected(5)
    assert.is_nil(ok)
    assert.are.equal("socket.io: the server refused the namespace /chat: not authorized", err)
    assert.are.equal(err, refused_with)
    assert.are.same({ nil, "not connected: " .. err }, { bad:emit("x") })
    s:close()
  end)

  it("gets what the server sends to a room it joined", function()
    local a, b = connect(), connect()
    assert.are.equal("blue", a:call("join", "blue"))
    b:emit("to_room", "blue", "hello room")
    local room, text = a:expect("room", 5)
    assert.are.equal("blue", room)
    assert.are.equal("hello room", text)
    assert.is_true(a:call("leave", "blue"))
    a:close()
    b:close()
  end)

  it("hears the server disconnect it", function()
    local s = connect()
    local reason
    s:on_disconnect(function(_, why, will_reconnect)
      reason = why
      assert.is_false(will_reconnect)
    end)
    s:emit("kick")
    local ok, err = s:expect("never", 5)
    assert.is_nil(ok)
    assert.are.equal("disconnected: io server disconnect", err)
    assert.are.equal("io server disconnect", reason)
    assert.is_false(s:connected())
  end)

  it("answers the server's pings without the script seeing them", function()
    local s = connect()
    local c = s.client.conn
    -- The server pings every second and drops a client that does not answer.
    local deadline = mw.now() + 8
    while c:stats().auto_replies < 3 and mw.now() < deadline do mw.sleep(0.2) end
    assert.is_true(c:stats().auto_replies >= 3)
    assert.are.equal(5, s:call("add", 2, 3))
    s:close()
  end)

  it("raises at the caller's line on misuse", function()
    local s = connect()
    assert.has_error(function() s:emit("connect") end,
      'bad argument #1 to \'s:emit\' ("connect" is reserved by Socket.IO; '
        .. "use on_connect / on_disconnect / on_connect_error)")
    assert.has_error(function() sio.connect("ftp://x") end,
      'bad argument #1 to \'sio.connect\' (an http://, https://, ws:// or wss:// URL expected, got "ftp://x")')
    assert.has_error(function() sio.connect(url, { nope = 1 }) end,
      "bad argument #2 to 'sio.connect' (unknown option 'opts.nope')")
    -- A callback cannot wait: call refuses, and leaves no ack behind.
    local ok, err
    mw.after(0, function() ok, err = pcall(s.call, s, "add", 1, 2) end)
    mw.sleep(0.05)
    assert.is_false(ok)
    assert.matches("s:call: only inside a coroutine", err)
    assert.are.equal(0, s:stats().pending_acks)
    s:close()
  end)
end)

describe("socket.io client against a hostile server", function()
  -- A moonwire server that sends `packets` after a valid Engine.IO open.
  local function hostile(packets)
    local server = assert(mw.listen("ws://127.0.0.1:0/"))
    server:on_connect(function(peer)
      peer:send('0{"sid":"x","upgrades":[],"pingInterval":25000,"pingTimeout":20000,"maxPayload":1000000}')
      for _, p in ipairs(packets) do peer:send(p[1], p[2]) end
    end)
    return server
  end

  local cases = {
    { { { '0{"sid":1}' } }, "engine.io: open packet: the sid is missing or not a string" },
    { { { "40{}" } }, "socket.io: CONNECT: the sid is missing from the server's answer" },
    { { { "49" } }, 'socket.io: the packet type "9" is not one of 0-6' },
    { { { "40{\"sid\":\"a\"}" }, { "42[1,2]" } },
      "socket.io: EVENT: the event name (the first element of the data) is not a string" },
    { { { "40{\"sid\":\"a\"}" }, { "451-[\"x\",{\"_placeholder\":true,\"num\":3}]" }, { "\1", "binary" } },
      "socket.io: BINARY_EVENT: placeholder num 3 out of range (1 attachments)" },
    { { { "40{\"sid\":\"a\"}" }, { "4599-[\"x\"]" } },
      "socket.io: BINARY_EVENT announces 99 attachments, more than max_attachments (64)" },
    { { { "40{\"sid\":\"a\"}" }, { "\1\2", "binary" } },
      "socket.io: a binary message arrived with no BINARY_EVENT or BINARY_ACK waiting for attachments" },
    { { { "40{\"sid\":\"a\"}" }, { "42[\"x\"" } }, "socket.io: EVENT: the data is not JSON:" },
    { { { "X" } }, 'engine.io: unknown packet type "X"' },
  }

  for i, case in ipairs(cases) do
    it("closes the connection on a malformed packet (" .. i .. ") and keeps the others", function()
      local server = hostile(case[1])
      local good = sio.connect(url, { reconnect = false })
      local bad = sio.connect(server:url(), { reconnect = false })
      local ok, err
      if bad:wait_connected(5) then
        ok, err = bad:expect("never", 5)
      else
        ok, err = bad:wait_connected(5)
      end
      assert.is_nil(ok)
      assert.are.equal(case[2], err:gsub("^disconnected: ", ""):sub(1, #case[2]))
      assert.are.equal("closed", bad.client.conn:state())
      -- The good connection, opened at the same time, is untouched.
      assert(good:wait_connected(5))
      assert.are.equal(3, good:call("add", 1, 2))
      good:close()
    end)
  end
end)

describe("socket.io mock server against a hostile client", function()
  it("closes the client that sends a malformed packet and keeps serving the others", function()
    local server = assert(sio.listen("ws://127.0.0.1:0/", { ping_interval = 5, ping_timeout = 5 }))
    server:on_connect(function(socket) socket:on("add", function(a, b) return a + b end) end)
    local good = sio.connect(server:url(), { reconnect = false })
    assert(good:wait_connected(5))
    local raw = mw.connect(server:url() .. "socket.io/?EIO=4&transport=websocket", { reconnect = false })
    local closed
    raw:on_close(function(_, code, reason) closed = { code, reason } end)
    assert(raw:expect("^0{", 5))
    raw:send("40")
    assert(raw:expect("^40{", 5))
    raw:send('451-["add",{"_placeholder":true,"num":0}]')
    raw:send('42["add",1,2]') -- text where an attachment is due
    assert.are.same({ nil, "closed" }, { raw:receive(5) })
    assert.are.same({ 1002, "protocol error" }, closed)
    assert.are.equal(7, good:call("add", 3, 4))
    good:close()
    server:close()
  end)
end)
