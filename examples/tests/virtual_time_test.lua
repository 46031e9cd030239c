-- virtual_time_test.lua: a heartbeat drops a silent peer after 30 s, then the
-- client reconnects with backoff 1, 2, 4, 8, 16 s. About 61 s of timers.
--   moonwire test --virtual-time examples/tests   -- virtual clock: milliseconds,
--                                                    exact timestamps
--   moonwire test examples/tests                  -- real clock: the same test
--                                                    with every duration x 0.05
-- (docs/testing.md, "Virtual time").

-- One unit of time: a second on the virtual clock; 50 ms of real time, so the
-- real-time run takes about 3 s instead of a minute.
local U = mw.virtual_time() and 1 or 0.05

-- The real clock is late by however busy the machine is, without a bound a
-- test could rely on: in real time each timestamp is checked only for not
-- coming early, counted from before the dial (`lead` is how long before
-- on_open that was: the heartbeat starts at the open, and on_open may run
-- late); the order of the events is checked below either way.
local lead = 0
local function near(expected, seen, what)
  if mw.virtual_time() then
    assert.are.equal(expected, seen, what)
  else
    assert.is_true(seen + lead >= expected * U,
      ("%s at %.3f s after the dial, expected no earlier than %.3f s"):format(what, seen + lead, expected * U))
  end
end

describe("virtual time", function()
  it("drops a silent peer after 30 s, then backs off 1, 2, 4, 8, 16 s", function()
    local server = assert(mw.listen("ws://127.0.0.1:0/", { heartbeat = false }))
    local peers = 0
    server:on_connect(function(peer)
      peers = peers + 1
      if peers == 1 then
        peer:pause(1000 * U)          -- reads nothing, answers no ping
        server:reject_next(4, 503)    -- the next four handshakes are refused
      end
    end)

    local dialled = mw.now()
    local c = mw.connect(server:url(), {
      heartbeat = { interval = 10 * U, timeout = 20 * U },
      reconnect = { initial = 1 * U, factor = 2, max = 16 * U, jitter = 0, attempts = 10, retry_http = true },
    })
    local t0, events, opens, reopened = nil, {}, 0, nil
    c:on_open(function()
      opens = opens + 1
      if opens == 1 then t0 = mw.now(); lead = t0 - dialled else reopened = mw.now() - t0 end
    end)
    c:on_close(function(_, code, _, info)
      events[#events + 1] = { "close", mw.now() - t0, code, info.by }
    end)
    c:on_reconnect(function(_, attempt, delay)
      events[#events + 1] = { "retry", mw.now() - t0, attempt, delay }
    end)
    c:on_error(function() events[#events + 1] = { "refused", mw.now() - t0 } end)

    while opens < 2 do mw.sleep(U / 4) end

    -- ping at 10, no pong by 30: dropped (1006, by the network)
    assert.are.same({ "close", 1006, "network" }, { events[1][1], events[1][3], events[1][4] })
    near(30, events[1][2], "drop")
    -- each retry: announced at the drop or a refusal, dialled after its delay
    local at, i = 30, 2
    for attempt, delay in ipairs({ 1, 2, 4, 8, 16 }) do
      local e = events[i]
      assert.are.same({ "retry", attempt }, { e[1], e[3] })
      near(delay, e[4], "delay of attempt " .. attempt)
      at = at + delay
      if attempt < 5 then
        assert.are.equal("refused", events[i + 1][1])
        near(at, events[i + 1][2], "refusal of attempt " .. attempt)
        i = i + 2
      end
    end
    near(61, reopened, "reopen")   -- the fifth attempt opens; 30 + 1 + 2 + 4 + 8 + 16
    server:close()
  end)
end)
