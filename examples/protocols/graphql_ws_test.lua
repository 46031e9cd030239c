-- moonwire.graphql_ws against the real Strawberry server
-- (scripts/protocols/graphql_server.py, started by scripts/protocols/graphql_ws.sh),
-- over both subprotocols; then against moonwire's own mock, and a hostile
-- server whose malformed messages close that connection in words.
--
--   GRAPHQL_WS_URL=ws://127.0.0.1:PORT/graphql moonwire test examples/protocols/graphql_ws_test.lua
local gql = require "moonwire.graphql_ws"

local url = os.getenv("GRAPHQL_WS_URL") or "ws://127.0.0.1:8000/graphql"

for _, protocol in ipairs { "graphql-transport-ws", "graphql-ws" } do
  describe("graphql_ws client over " .. protocol .. " against Strawberry", function()
    local function connect(opts)
      opts = opts or {}
      opts.protocol, opts.reconnect = protocol, false
      local client = gql.connect(url, opts)
      assert(client:wait_ready(5))
      return client
    end

    it("negotiates the subprotocol and sends the connection_init payload", function()
      local client = connect({ payload = { token = "t-1" } })
      assert.are.equal(protocol, client:protocol_name())
      local sub = assert(client:subscribe("subscription { token }"))
      assert.are.equal("t-1", sub:next(5).data.token)
      client:close()
    end)

    if protocol == "graphql-ws" then
      it("hears Strawberry refuse a query on the legacy protocol, in words", function()
        local client = connect()
        local data, err = client:query("{ hello }")
        assert.is_nil(data)
        assert.are.equal("graphql: queries are not allowed", err)
        client:close()
      end)
    end

    -- Queries and mutations: Strawberry runs them on graphql-transport-ws only.
    local it_transport = protocol == "graphql-transport-ws" and it or function() end
    it_transport("runs a query with variables and a mutation", function()
      local client = connect()
      assert.are.equal("hello ann", client:query("query Hi($n: String) { hello(name: $n) }", { n = "ann" }).hello)
      assert.are.equal(5, client:query("{ add(a: 2, b: 3) }").add)
      local set = client:mutation("mutation Set($t: String!) { setMessage(text: $t) }", { t = protocol })
      assert.are.equal(protocol, set.setMessage)
      assert.are.equal(protocol, client:query("{ message }").message)
      client:close()
    end)

    it_transport("turns GraphQL errors into words, with the result", function()
      local client = connect()
      local data, err, result = client:query("{ boom }")
      assert.is_nil(data)
      assert.are.equal("graphql: boom went the field (at boom)", err)
      assert.are.equal(mw.json.null, result.data.boom)
      data, err = client:query("{ nosuchfield }")
      assert.is_nil(data)
      assert.matches("^graphql: Cannot query field 'nosuchfield'", err)
      client:close()
    end)

    it("reads a subscription as an iterator until the server completes it", function()
      local client = connect()
      local sub = assert(client:subscribe("subscription { count(to: 4) }"))
      local got = {}
      for result in sub:results(5) do got[#got + 1] = result.data.count end
      assert.are.same({ 1, 2, 3, 4 }, got)
      client:close()
    end)

    it("delivers a subscription to callbacks, and stops one", function()
      local client = connect()
      local got, completed = {}, false
      local sub
      sub = assert(client:subscribe("subscription { ticks(delay: 0.02) }", nil, {
        on_next = function(result)
          got[#got + 1] = result.data.ticks
          if #got == 3 then sub:stop() end
        end,
        on_complete = function() completed = true end,
      }))
      -- Another operation on the same connection while the subscription runs.
      local other = assert(client:subscribe("subscription { count(to: 2) }"))
      for _ in other:results(5) do end
      local deadline = mw.now() + 5
      while not completed and mw.now() < deadline do mw.sleep(0.02) end
      assert.is_true(completed)
      assert.are.same({ 1, 2, 3 }, got)
      client:close()
    end)

    it("raises the server's subscription error at the loop", function()
      local client = connect()
      local sub = assert(client:subscribe("subscription { failing(after: 2) }"))
      local got = {}
      local ok, err = pcall(function()
        for result in sub:results(5) do
          if result.errors then error("graphql: " .. gql.errors_text(result.errors), 0) end
          got[#got + 1] = result.data.failing
        end
      end)
      assert.is_false(ok)
      assert.matches("the subscription failed on purpose", err)
      assert.are.same({ 1, 2 }, got)
      client:close()
    end)

    it("says when the server refuses connection_init", function()
      local client = gql.connect(url, { protocol = protocol, payload = { token = "bad" }, reconnect = false })
      local ok, err = client:wait_ready(5)
      assert.is_nil(ok)
      if protocol == "graphql-transport-ws" then
        assert.are.equal("graphql-transport-ws: the server closed the connection with 4403: "
          .. "forbidden (connection_init refused)", err)
      else
        assert.are.equal("graphql-ws: the server refused connection_init: bad token", err)
      end
      local data, qerr = client:query("{ hello }")
      assert.is_nil(data)
      assert.are.equal(err, qerr)
    end)
  end)
end

describe("graphql_ws keep-alive", function()
  it("hears the legacy server's ka without the script seeing it", function()
    local client = gql.connect(url, { protocol = "graphql-ws", reconnect = false })
    assert(client:wait_ready(5))
    local c = client.conn
    -- Strawberry sends "ka" every 0.5 s here.
    local deadline = mw.now() + 5
    while c:stats().received < 4 and mw.now() < deadline do mw.sleep(0.1) end
    assert.is_true(c:stats().received >= 4)
    local sub = assert(client:subscribe("subscription { count(to: 1) }"))
    assert.are.equal(1, sub:next(5).data.count)
    client:close()
  end)

  it("answers a server's graphql-transport-ws ping with pong (moonwire mock)", function()
    local server = assert(gql.listen("ws://127.0.0.1:0/graphql", { ping_interval = 0.1,
      operations = { Hi = function() return { hi = "there" } end } }))
    local client = gql.connect(server:url(), { reconnect = false })
    assert(client:wait_ready(5))
    local deadline = mw.now() + 5
    while client.conn:stats().auto_replies < 3 and mw.now() < deadline do mw.sleep(0.05) end
    assert.is_true(client.conn:stats().auto_replies >= 3)
    assert.are.equal("there", client:query("query Hi { hi }").hi)
    client:close()
    server:close()
  end)
end)

describe("graphql_ws mock server", function()
  local server
  before_each(function()
    server = assert(gql.listen("ws://127.0.0.1:0/graphql", {
      on_connect = function(payload) if payload.token == "bad" then return false, "bad token" end end,
      operations = {
        Add = function(ctx) return { sum = ctx.variables.a + ctx.variables.b } end,
        Fail = function() error("resolver failed", 0) end,
        Count = function(ctx)
          for i = 1, ctx.variables.to do
            ctx.emit({ count = i })
            mw.sleep(0.01)
          end
        end,
      },
    }))
  end)
  after_each(function() server:close() end)

  for _, protocol in ipairs { "graphql-transport-ws", "graphql-ws" } do
    it("serves queries, errors and subscriptions over " .. protocol, function()
      local client = gql.connect(server:url(), { protocol = protocol, reconnect = false })
      assert(client:wait_ready(5))
      assert.are.equal(protocol, client:protocol_name())
      assert.are.equal(5, client:query("query Add($a: Int, $b: Int) { sum }", { a = 2, b = 3 }).sum)
      local data, err = client:query("query Fail { x }")
      assert.is_nil(data)
      assert.are.equal("graphql: resolver failed", err)
      local got = {}
      for result in assert(client:subscribe("subscription Count { count }", { to = 3 })):results(5) do
        got[#got + 1] = result.data.count
      end
      assert.are.same({ 1, 2, 3 }, got)
      client:close()
    end)
  end

  it("closes a client that sends a malformed message and keeps serving the others", function()
    local good = gql.connect(server:url(), { reconnect = false })
    assert(good:wait_ready(5))
    local raw = mw.connect(server:url(), { protocols = { "graphql-transport-ws" }, codec = "json", reconnect = false })
    local closed
    raw:on_close(function(_, code) closed = code end)
    raw:send({ type = "connection_init" })
    assert(raw:expect({ type = "connection_ack" }, 5))
    raw:send({ type = "subscribe", payload = { query = "{ x }" } }) -- no id
    assert.are.same({ nil, "closed" }, { raw:receive(5) })
    assert.are.equal(4400, closed)
    assert.are.equal(3, good:query("query Add { sum }", { a = 1, b = 2 }).sum)
    good:close()
  end)

  it("raises at the caller's line on misuse", function()
    local client = gql.connect(server:url(), { reconnect = false })
    assert(client:wait_ready(5))
    assert.has_error(function() client:query(42) end,
      "bad argument #1 to 'client:query' (GraphQL document expected, got number)")
    assert.has_error(function() gql.connect(url, { protocol = "mqtt" }) end,
      'bad argument #2 to \'gql.connect\' (opts.protocol: "graphql-transport-ws" or "graphql-ws" expected, got "mqtt")')
    assert.has_error(function() client:subscribe("subscription { x }", nil, { on_next = 1 }) end,
      "bad argument #3 to 'client:subscribe' (opts.on_next: function expected, got number)")
    local ok, err
    mw.after(0, function() ok, err = pcall(client.query, client, "query Add { sum }") end)
    mw.sleep(0.05)
    assert.is_false(ok)
    assert.matches("client:query: only inside a coroutine", err)
    client:close()
  end)

  it("refuses connection_init as the real servers do", function()
    local client = gql.connect(server:url(), { payload = { token = "bad" }, reconnect = false })
    local ok, err = client:wait_ready(5)
    assert.is_nil(ok)
    assert.are.equal("graphql-transport-ws: the server closed the connection with 4403: "
      .. "forbidden (connection_init refused)", err)
  end)
end)

describe("graphql_ws client against a hostile server", function()
  local cases = {
    { { '{"type":"connection_ack"}', '{"nope":1}' }, "graphql-transport-ws: a message without a string 'type'" },
    { { '{"type":"connection_ack"}', '{"type":"next","payload":{}}' },
      "graphql-transport-ws: next: the 'id' is missing or not a string" },
    { { '{"type":"connection_ack"}', '{"type":"bogus"}' }, 'graphql-transport-ws: unknown message type "bogus"' },
    { { '{"type":"connection_ack"}', '{"type":"connection_ack"}' }, "graphql-transport-ws: connection_ack twice" },
    { { '{"type":"connection_ack"}', "{oops" }, "graphql-transport-ws: a message that is not JSON" },
  }
  for i, case in ipairs(cases) do
    it("closes the connection on a malformed message (" .. i .. ") and keeps the others", function()
      local hostile = assert(mw.listen("ws://127.0.0.1:0/", { protocols = { "graphql-transport-ws" } }))
      hostile:on_message(function(peer, msg)
        if msg:find("connection_init", 1, true) then
          for _, m in ipairs(case[1]) do peer:send(m) end
        end
      end)
      local good = gql.connect(url, { reconnect = false })
      local bad = gql.connect(hostile:url(), { reconnect = false })
      local errors = {}
      bad:on_error(function(_, err) errors[#errors + 1] = err end)
      local sub = bad:subscribe("subscription { x }")
      local ok, err = sub:next(5)
      assert.is_nil(ok)
      assert.are.equal(case[2], err:sub(1, #case[2]))
      assert.are.equal(err, errors[1])
      assert(good:wait_ready(5))
      assert.are.equal("hello world", good:query("{ hello }").hello)
      good:close()
      hostile:close()
    end)
  end
end)
