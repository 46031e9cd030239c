-- moonwire.stomp against RabbitMQ (Debian's rabbitmq-server with rabbitmq_web_stomp and
-- rabbitmq_stomp), over WebSocket and over TCP; then the framing corners and a
-- misbehaving broker, played by moonwire servers in this file.
--
--   STOMP_WS_URL=ws://127.0.0.1:15674/ws STOMP_TCP_URL=tcp://127.0.0.1:61613 \
--   moonwire test examples/protocols/stomp_test.lua     (scripts/protocols/stomp.sh sets these)
local stomp = require "moonwire.stomp"

local URLS = {
  { "WebSocket", assert(os.getenv("STOMP_WS_URL"), "STOMP_WS_URL: RabbitMQ's Web-STOMP URL") },
  { "TCP", assert(os.getenv("STOMP_TCP_URL"), "STOMP_TCP_URL: RabbitMQ's STOMP TCP URL") },
}

local function options(extra)
  local o = { login = "guest", passcode = "guest", reconnect = false }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

local function fresh_queue(name)
  return ("/queue/mw-%s-%d"):format(name, math.random(1 << 30))
end

for _, transport in ipairs(URLS) do
  local label, url = transport[1], transport[2]

  describe("STOMP over " .. label .. " against RabbitMQ", function()
    local client
    before_each(function()
      client = stomp.connect(url, options())
      assert(client:wait_connected(10))
    end)
    after_each(function() client:close() end)

    it("connects with STOMP 1.2 and negotiates heart-beats", function()
      local headers = assert(client:wait_connected())
      assert.are.equal("1.2", headers.version)
      assert.matches("^RabbitMQ", headers.server)
      -- Asked for 10 s both ways; RabbitMQ agrees.
      assert.are.same({ send = 10, expect = 10 }, client.heart_beat)
    end)

    it("sends with a receipt and receives, bodies with NUL bytes and escaped headers intact", function()
      local queue = fresh_queue("roundtrip")
      local sub = client:subscribe(queue, { receipt = true })
      local body = "one\0two\0\n\r\nthree " .. string.rep("x", 100000)
      assert(client:send(queue, body, { receipt = true, ["x-note"] = "a:b\nc\\d\re" }))
      local msg = assert(sub:receive(5))
      assert.are.equal(#body, #msg.body)
      assert.are.equal(body, msg.body)
      assert.are.equal("a:b\nc\\d\re", msg.headers["x-note"])
      assert.are.equal(queue, msg.destination)
      assert.are.equal(sub, msg.subscription)
    end)

    it("calls a subscription's function for each message, in order", function()
      local queue, done_queue = fresh_queue("callback"), fresh_queue("done")
      local done = client:subscribe(done_queue, { receipt = true })
      local got = {}
      client:subscribe(queue, { receipt = true }, function(msg)
        got[#got + 1] = msg.body
        if #got == 5 then client:send(done_queue, "all five") end
      end)
      for i = 1, 5 do assert(client:send(queue, "m" .. i)) end
      assert.are.equal("all five", assert(done:receive(5)).body)
      assert.are.same({ "m1", "m2", "m3", "m4", "m5" }, got)
    end)

    it("acks and nacks one by one (client-individual): a NACKed message comes again", function()
      local queue = fresh_queue("individual")
      local sub = client:subscribe(queue, { ack = "client-individual", receipt = true })
      assert(client:send(queue, "keep", { receipt = true }))
      assert(client:send(queue, "again", { receipt = true }))
      local first, second = assert(sub:receive(5)), assert(sub:receive(5))
      assert.are.same({ "keep", "again" }, { first.body, second.body })
      assert(first:ack({ receipt = true }))
      assert(client:nack(second, { receipt = true }))
      local redelivered = assert(sub:receive(5))
      assert.are.equal("again", redelivered.body)
      assert.are.equal("true", redelivered.headers.redelivered)
      assert(redelivered:ack({ receipt = true }))
    end)

    it("acks cumulatively (client): one ACK takes every message before it", function()
      local queue = fresh_queue("cumulative")
      local sub = client:subscribe(queue, { ack = "client", receipt = true, headers = { ["prefetch-count"] = 10 } })
      for i = 1, 3 do assert(client:send(queue, "m" .. i)) end
      local last
      for i = 1, 3 do last = assert(sub:receive(5)) assert.are.equal("m" .. i, last.body) end
      assert(last:ack({ receipt = true }))
      assert(sub:unsubscribe({ receipt = true }))
      -- Had m1 or m2 stayed unacknowledged, the broker would give them to the next subscriber first.
      assert(client:send(queue, "m4", { receipt = true }))
      local again = client:subscribe(queue, { ack = "client", receipt = true })
      assert.are.equal("m4", assert(again:receive(5)).body)
    end)

    it("sends in transactions: ABORT drops, COMMIT delivers", function()
      local queue = fresh_queue("tx")
      local sub = client:subscribe(queue, { receipt = true })
      assert(client:begin("t1"))
      assert(client:send(queue, "never", { transaction = "t1" }))
      assert(client:abort("t1", { receipt = true }))
      assert(client:begin("t2"))
      assert(client:send(queue, "committed", { transaction = "t2" }))
      assert(client:commit("t2", { receipt = true }))
      assert.are.equal("committed", assert(sub:receive(5)).body)
    end)

    it("keeps at most max_queued unread messages, and says so", function()
      local queue, done_queue = fresh_queue("bounded"), fresh_queue("said")
      local said = client:subscribe(done_queue, { receipt = true })
      client:on_error(function(_, err) client:send(done_queue, err) end)
      local sub = client:subscribe(queue, { max_queued = 2, receipt = true })
      for i = 1, 3 do assert(client:send(queue, "m" .. i)) end
      assert.are.equal("stomp: subscription " .. sub.id .. ": 2 messages wait unread or in its function (max_queued); "
        .. 'dropped 1 so far (ack = "auto")', assert(said:receive(5)).body)
      assert.are.same({ "m1", "m2", 1 }, { assert(sub:receive(5)).body, assert(sub:receive(5)).body, sub.dropped })
    end)

    it("turns an ERROR frame into words, for the receipt that waited and for on_error", function()
      local errors = {}
      client:on_error(function(_, err) errors[#errors + 1] = err end)
      local ok, err = client:send("/nowhere/at-all", "x", { receipt = true })
      assert.is_nil(ok)
      assert.matches("^stomp: ERROR from the broker: Unknown destination", err)
      assert.matches("^stomp: ERROR from the broker: Unknown destination", errors[1])
    end)

    it("refuses a bad password in words and does not retry", function()
      local bad = stomp.connect(url, { login = "guest", passcode = "wrong" })
      finally(function() bad:close() end)
      local ok, err = bad:wait_connected(10)
      assert.is_nil(ok)
      assert.matches("^stomp: ERROR from the broker: Bad CONNECT %(Access refused for user 'guest'%)", err)
      assert.matches("^clos", bad.connection:state())   -- closing (WebSocket) or closed, for good
    end)

    it("keeps a quiet connection alive with heart-beats the script never sees", function()
      -- RabbitMQ beats at most once a second.
      local quiet = stomp.connect(url, options({ heart_beat = { 1000, 1000 } }))
      finally(function() quiet:close() end)
      assert(quiet:wait_connected(10))
      assert.are.same({ send = 1, expect = 1 }, quiet.heart_beat)
      local sub = quiet:subscribe(fresh_queue("quiet"))
      -- Nothing is sent to the queue: the wait ends by its timeout, with beats going both ways.
      assert.are.same({ nil, "timeout after 2.5 s: no MESSAGE on " .. sub.destination }, { sub:receive(2.5) })
      local stats = quiet.connection:stats()
      -- CONNECT, SUBSCRIBE and EOLs out; CONNECTED and EOLs in.
      assert.is_true(stats.sent >= 4, "sent: " .. stats.sent)
      assert.is_true(stats.received >= 3, "received: " .. stats.received)
      assert.are.equal("ready", quiet.connection:state())
    end)

    it("sends its own heart-beats when the broker sends none", function()
      local quiet = stomp.connect(url, options({ heart_beat = { 1000, 0 } }))
      finally(function() quiet:close() end)
      assert(quiet:wait_connected(10))
      assert.are.same({ send = 1, expect = 0 }, quiet.heart_beat)
      local sub = quiet:subscribe(fresh_queue("one-way"))
      assert.is_nil(sub:receive(2.5))
      -- CONNECT, SUBSCRIBE and an EOL a second.
      assert.is_true(quiet.connection:stats().sent >= 4, "sent: " .. quiet.connection:stats().sent)
      assert.are.equal("ready", quiet.connection:state())
    end)

    it("rejects misuse at the caller's line", function()
      local ok, err = pcall(client.send, client, 42, "x")
      assert.is_false(ok)
      assert.matches("bad argument #1 to 'client:send' %(destination string expected, got number%)", err)
      ok, err = pcall(function() client:subscribe("/queue/x", { ack = "sometimes" }) end)
      assert.is_false(ok)
      assert.matches("stomp_test.lua:%d+: bad argument #2 to 'client:subscribe' %(opts.ack:", err)
    end)
  end)
end

-- A broker played by a moonwire server: it answers CONNECT with CONNECTED and then
-- sends what each test tells it to, as WebSocket messages or TCP writes.
local function fake_broker(scheme, script)
  local opts = scheme == "ws" and { protocols = { "v12.stomp" } } or { framing = "raw" }
  local s = assert(mw.listen(scheme .. "://127.0.0.1:0/", opts))
  s:on_message(function(peer, data)
    if data:find("^CONNECT\n") then script(peer, data) end
  end)
  return s
end

local CONNECTED = "CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0"
local function message(sub, body, extra)
  return ("MESSAGE\ndestination:/queue/t\nmessage-id:%s\nsubscription:%s\ncontent-length:%d\n%s\n%s\0")
    :format(body:sub(1, 8), sub, #body, extra or "", body)
end

describe("STOMP framing", function()
  for _, scheme in ipairs { "ws", "tcp" } do
    it("takes several frames in one " .. scheme .. " message and one frame in several", function()
      local body = "split \0 body " .. string.rep("y", 5000)
      local whole = message("sub-1", body)
      local s = fake_broker(scheme, function(peer)
        -- CONNECTED and two MESSAGEs in one piece, with heart-beat EOLs between them;
        -- then a MESSAGE in 7-byte pieces, then one in two.
        peer:send(CONNECTED .. "\n" .. message("sub-1", "first") .. "\r\n\n" .. message("sub-1", "second"), "binary")
        mw.after(0.05, function()
          for i = 1, #whole, 7 do peer:send(whole:sub(i, i + 6), "binary") end
          peer:send(whole:sub(1, 100), "binary")
          peer:send(whole:sub(101) .. "\n", "binary")
        end)
      end)
      finally(function() s:close() end)
      local client = stomp.connect(s:url():gsub("/$", "") .. (scheme == "ws" and "/" or ""), options())
      finally(function() client:close() end)
      local sub = client:subscribe("/queue/t")
      assert(client:wait_connected(5))
      assert.are.equal("first", assert(sub:receive(5)).body)
      assert.are.equal("second", assert(sub:receive(5)).body)
      assert.are.equal(body, assert(sub:receive(5)).body)
      assert.are.equal(body, assert(sub:receive(5)).body)
    end)
  end

  it("drops a broker that stops sending heart-beats, and sends its own EOLs", function()
    local eols = 0
    local s = fake_broker("ws", function(peer)
      peer:send("CONNECTED\nversion:1.2\nheart-beat:200,200\n\n\0")
    end)
    s:on_message(function(_, data) if data == "\n" then eols = eols + 1 end end)
    finally(function() s:close() end)
    local client = stomp.connect(s:url(), options({ heart_beat = { 200, 200 } }))
    local closed
    client:on_close(function(_, code, reason) closed = { code = code, reason = reason, at = mw.now() } end)
    assert(client:wait_connected(5))
    local connected_at = mw.now()
    -- The fake broker never sends a beat: after the agreed silence and as long again, the client gives up.
    local waited, why = client:subscribe("/queue/none"):receive(5)
    assert.is_nil(waited)
    assert.matches("^connection closed %(1006", why)
    assert.is_true(closed.at - connected_at < 2, "dropped after " .. (closed.at - connected_at) .. " s")
    assert.is_true(eols >= 1, "the client sent no heart-beat")
  end)
end)

describe("STOMP against a misbehaving broker", function()
  local cases = {
    { "an unknown command", "BOGUS\n\n\0",
      'stomp: unknown command "BOGUS" (a server sends CONNECTED, MESSAGE, RECEIPT or ERROR)' },
    { "a header line without a colon", "MESSAGE\nnocolon\n\n\0", 'stomp: MESSAGE: header line "nocolon" has no \':\'' },
    { "an undefined escape", "MESSAGE\nsubscription:a\\tb\n\n\0",
      'stomp: MESSAGE header subscription: undefined escape sequence \'\\t\' (STOMP 1.2 has \\r \\n \\c \\\\)' },
    { "a content-length that is not a number", "MESSAGE\ncontent-length:ten\n\n\0",
      'stomp: MESSAGE: header content-length must be a number of bytes, got "ten"' },
    { "a body longer than its content-length", "MESSAGE\ncontent-length:1\n\nab\0",
      "stomp: MESSAGE: no NUL after the 1 bytes of body that content-length announced" },
    { "a frame larger than max_frame", "MESSAGE\nsubscription:sub-1\n\n" .. string.rep("z", 70000),
      "stomp: a frame larger than max_frame (65536 bytes) is coming; closed" },
  }
  for _, case in ipairs(cases) do
    it("closes that connection on " .. case[1] .. " and keeps serving the others", function()
      local s = fake_broker("ws", function(peer) peer:send(CONNECTED .. case[2], "binary") end)
      finally(function() s:close() end)
      local good = stomp.connect(URLS[1][2], options())
      finally(function() good:close() end)
      local bad = stomp.connect(s:url(), options({ max_frame = 65536 }))
      local errors, closed = {}, nil
      bad:on_error(function(_, err) errors[#errors + 1] = err end)
      bad:on_close(function(_, code) closed = code end)
      local sub = bad:subscribe("/queue/t")
      local msg, err = sub:receive(5)
      assert.is_nil(msg)
      assert.are.equal(case[3], errors[1])
      assert.are.equal(1002, closed)
      assert.are.equal(case[3], err)
      -- The other connection, to the real broker, goes on.
      assert(good:wait_connected(10))
      local queue = fresh_queue("steady")
      local gsub = good:subscribe(queue, { receipt = true })
      assert(good:send(queue, "still here"))
      assert.are.equal("still here", assert(gsub:receive(5)).body)
    end)
  end
end)
