-- Where a message goes: a session with one on_message handler and nothing else
-- to do with its messages gets them straight from Swift; anything else (a
-- waiter, a second handler, an auto_reply rule, a message the codec cannot
-- decode) sends them through the prelude's dispatcher again. Both ways must
-- give the order the docs promise.
local helpers = require("helpers")

-- A handler on `c` that keeps what it hears (through `pick`, if given) in the list returned.
local function keep(c, pick)
  local heard = {}
  c:on_message(function(_, m) heard[#heard + 1] = pick and pick(m) or m end)
  return heard
end

-- Waits until `list` holds `n` entries; fails the test after 5 s.
local function await(list, n)
  assert.is_true(helpers.eventually(function() return #list == n end))
end

-- An open connection to a fresh echo server, with a keeping handler.
local function echoing()
  local _, url = helpers.echo_server()
  local c = mw.connect(url)
  local heard = keep(c)
  assert(c:wait_open(5))
  return c, heard
end

describe("one on_message handler", function()
  it("gives way to a waiting request, then hears the rest", function()
    local c, heard = echoing()
    c:send("before")
    await(heard, 1)
    assert.are.equal("q1", c:request("q1", "^q1$", 5))
    c:send("after")
    await(heard, 2)
    assert.are.same({ "before", "after" }, heard)
  end)

  it("gives way to a waiting receive", function()
    local c, heard = echoing()
    c:send("taken")
    assert.are.equal("taken", c:receive(5))
    c:send("heard")
    await(heard, 1)
    assert.are.same({ "heard" }, heard)
  end)

  it("is joined by a second handler added later: both hear each message", function()
    local c, first = echoing()
    c:send("one")
    await(first, 1)
    local second = keep(c)
    c:send("two")
    await(second, 1)
    assert.are.same({ "one", "two" }, first)
    assert.are.same({ "two" }, second)
  end)

  it("does not see what a later c:answer rule answers", function()
    local server = assert(mw.listen("ws://127.0.0.1:0"))
    local answers = {}
    server:on_message(function(_, m) answers[#answers + 1] = m end)
    server:on_connect(function(peer)
      mw.spawn(function()
        mw.sleep(0.05)
        peer:send("note")
        mw.sleep(0.05)
        peer:send("ping")
      end)
    end)
    local c = mw.connect(server:url())
    local heard = keep(c)
    c:answer("^ping$", "pong")
    await(answers, 1)
    assert.are.same({ "pong" }, answers)
    assert.are.same({ "note" }, heard)
  end)

  it("with codec json: a message that does not decode goes to on_error, not the handler", function()
    local server = assert(mw.listen("ws://127.0.0.1:0"))
    server:on_connect(function(peer)
      peer:send('{"n": 1}')
      peer:send("{not json")
      peer:send('{"n": 2}')
    end)
    local c = mw.connect(server:url(), { codec = "json" })
    local heard, errors = keep(c, function(m) return m.n end), {}
    c:on_error(function(_, _, raw) errors[#errors + 1] = raw end)
    await(heard, 2)
    assert.are.same({ 1, 2 }, heard)
    assert.are.same({ "{not json" }, errors)
  end)

  it("hears a connection that c:reconnect() brought back", function()
    local c, heard = echoing()
    c:close()
    assert.is_true(helpers.eventually(function() return c:state() == "closed" end))
    c:reconnect()
    assert(c:wait_open(5))
    c:send("again")
    await(heard, 1)
    assert.are.same({ "again" }, heard)
  end)
end)

describe("a server's on_message", function()
  it("added after a peer connected, hears that peer", function()
    local server = assert(mw.listen("ws://127.0.0.1:0"))
    local connected = mw.future()
    server:on_connect(function(peer) connected:set(peer) end)
    local c = mw.connect(server:url())
    assert(c:wait_open(5))
    assert(connected:wait(5))
    local heard = {}
    server:on_message(function(peer, m)
      heard[#heard + 1] = m
      peer:send("got " .. m)
    end)
    assert.are.equal("got hi", c:request("hi", "^got", 5))
    assert.are.same({ "hi" }, heard)
  end)
end)

describe("a server's peer that Lua already finalized", function()
  it("is passed over when the server's handlers change", function()
    -- A peer that ended and that nothing holds is finalized at the next collection,
    -- while the server's weak set of peer states lists it until the one after.
    local server = assert(mw.listen("ws://127.0.0.1:0/"))
    local gone = mw.future()
    server:on_message(function(peer, m) peer:send(m) end)
    server:on_close(function() gone:set(true) end)
    do
      local c = mw.connect(server:url())
      assert(c:wait_open(5))
      c:close()
    end
    assert.is_true(gone:wait(5))
    collectgarbage()
    server:on_message(function() end)
    local c = mw.connect(server:url())
    assert(c:wait_open(5))
    assert.are.equal("hi", c:request("hi", "^hi$", 5))
  end)
end)
