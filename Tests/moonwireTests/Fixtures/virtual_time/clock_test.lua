-- moonwire: virtual-time
-- Every reader of the clock, on the virtual one this pragma asks for: each
-- wait ends at its exact virtual instant (run with a 5 s per-test timeout: the
-- waits add up to minutes).

describe("the virtual clock", function()
  it("is on for this file", function()
    assert.is_true(mw.virtual_time())
  end)

  it("reaches mw.rate's starts while its calls sleep", function()
    -- Ten starts 0.1 s apart, each call sleeping 0.25 s, so that calls overlap. The
    -- schedule's times are sums of fractions (0.30000000000000004), which the clock,
    -- counting whole nanoseconds, must still reach (a timer's delay rounds up).
    local starts, ended = {}, 0
    local t0 = mw.now()
    local result = mw.rate({ rate = 10, duration = 1, fn = function(i)
      starts[i] = mw.now() - t0
      mw.sleep(0.25)
      ended = ended + 1
    end })
    assert.are.same({ started = 10, missed = 0 }, result)
    assert.are.equal(10, ended)
    for i = 1, 10 do
      assert.is_true(math.abs(starts[i] - (i - 1) / 10) < 1e-6, ("start %d at %.9f s"):format(i, starts[i]))
    end
    assert.is_true(math.abs(mw.now() - t0 - 1.15) < 1e-6)
  end)

  it("runs timers in deadline order, then sleeps exactly", function()
    local t0, seen = mw.now(), {}
    mw.after(3, function() seen[#seen + 1] = "after 3 at " .. (mw.now() - t0) end)
    mw.after(1, function() seen[#seen + 1] = "after 1 at " .. (mw.now() - t0) end)
    local every = mw.every(2, function() seen[#seen + 1] = "every 2 at " .. (mw.now() - t0) end)
    mw.sleep(5)
    every:cancel()
    assert.are.same({ "after 1 at 1.0", "every 2 at 2.0", "after 3 at 3.0", "every 2 at 4.0" }, seen)
    assert.are.equal(5, mw.now() - t0)
    mw.sleep(0.25)
    assert.are.equal(5.25, mw.now() - t0)
  end)

  it("outlasts the per-test timeout, which is real time", function()
    local t0 = mw.now()
    mw.sleep(3600)
    assert.are.equal(3600, mw.now() - t0)
  end)

  describe("with a server that never answers", function()
    local server, peers
    before_each(function()
      peers = {}
      server = assert(mw.listen("ws://127.0.0.1:0/", { heartbeat = false }))
      server:on_connect(function(peer) peers[#peers + 1] = peer end)
    end)
    after_each(function() server:close() end)

    it("times out receive, expect and request at their instants", function()
      local c = mw.connect(server:url(), { heartbeat = false })
      assert(c:wait_open(1))
      local t0 = mw.now()
      assert.are.same({ nil, "timeout" }, { c:receive(7) })
      assert.are.equal(7, mw.now() - t0)
      assert.are.same({ nil, "timeout" }, { c:expect("never", 11) })
      assert.are.equal(18, mw.now() - t0)
      assert.are.same({ nil, "timeout" }, { c:request("ping?", "pong", 2) })
      assert.are.equal(20, mw.now() - t0)
    end)

    it("drops after close_timeout when the close goes unanswered", function()
      local c = mw.connect(server:url(), { heartbeat = false, reconnect = false, close_timeout = 9 })
      assert(c:wait_open(1))
      peers[1]:pause(100)
      local t0, closed = mw.now(), nil
      c:on_close(function(_, code, _, info) closed = { mw.now() - t0, code, info.clean } end)
      c:close()
      while not closed do mw.sleep(0.5) end
      assert.are.same({ 9, 1006, false }, closed)
    end)

    it("gives up a handshake after connect_timeout", function()
      local tcp = assert(mw.listen("tcp://127.0.0.1:0"))   -- accepts, never speaks HTTP
      local t0 = mw.now()
      local c = mw.connect("ws://" .. tcp:url():match("//(.*)$") .. "/", { connect_timeout = 12, reconnect = false })
      local ok, err = c:wait_open(60)
      assert.is_nil(ok)
      assert.matches("timeout", err)
      assert.are.equal(12, mw.now() - t0)
      tcp:close()
    end)

    it("answers heartbeats on time (a live peer is not dropped)", function()
      local c = mw.connect(server:url(), { heartbeat = { interval = 10, timeout = 5 }, reconnect = false })
      assert(c:wait_open(1))
      local t0, closed = mw.now(), false
      c:on_close(function() closed = true end)
      mw.sleep(300)
      assert.is_false(closed)
      assert.are.equal("open", c:state())
      assert.are.equal(300, mw.now() - t0)
    end)
  end)
end)
