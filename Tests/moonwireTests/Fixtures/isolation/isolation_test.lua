-- Each test's failure, error or timeout ends that test only: after_each and
-- teardown still run, what the test opened is closed, the next starts clean.
-- Run with --timeout 3.
local server = assert(mw.listen("ws://127.0.0.1:0"))
server:on_message(function(peer, m) peer:send(m) end)
local url = server:url()
local log = {}
local leftover, reconnecting
local timer_fired = false

describe("isolation", function()
  after_each(function() log[#log + 1] = "after" end)
  teardown(function() log[#log + 1] = "teardown" end)

  it("fails while dialing", function()
    reconnecting = mw.connect("ws://127.0.0.1:1/", { reconnect = { initial = 0.01, max = 0.01 } })
    assert.are.equal(1, 2)
  end)

  it("times out in a request", function()
    leftover = mw.connect(url)
    mw.after(3.5, function() timer_fired = true end)
    leftover:request("ping", "^never$")
  end)

  it("throws in a callback", function()
    local c = mw.connect(url)
    c:on_message(function() error("callback exploded") end)
    assert(c:wait_open(5))
    c:send("x")
    mw.sleep(30)
  end)

  it("fails an assertion in a callback", function()
    local c = mw.connect(url)
    c:on_message(function(_, m) assert.are.equal("y", m) end)
    assert(c:wait_open(5))
    c:send("x")
    mw.sleep(30)
  end)

  it("misuses the API", function()
    local c = mw.connect(url)
    c:request(nil, "x", 1)
  end)

  it("starts clean", function()
    assert.are.same({ "after", "after", "after", "after", "after" }, log)
    assert.are.equal("closed", leftover:state())
    assert.are.equal("closed", reconnecting:state())
    -- Past the moment the timer of "times out in a request" was due.
    mw.sleep(0.8)
    assert.is_false(timer_fired)
  end)
end)

it("saw teardown run after the failures", function()
  assert.are.equal("teardown", log[#log])
end)

describe("coroutines a test spawned", function()
  local woke = false

  it("leaves one sleeping", function()
    mw.spawn(function()
      mw.sleep(0.2)
      woke = true
      error("a coroutine of an earlier test woke up")
    end)
  end)

  it("never sees it wake", function()
    mw.sleep(0.4)
    assert.is_false(woke)
  end)
end)
