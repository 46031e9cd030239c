-- moonwire.stomp across a restart of RabbitMQ: the broker is stopped by PID while a
-- message is delivered but not acknowledged (ack = "client-individual") and another is
-- sent while it is down; once it is back, the client reconnects, subscribes again
-- (on_connected says so), and both messages arrive: nothing is lost.
--
--   STOMP_WS_URL=... STOMP_TCP_URL=... STOMP_BROKER_STOP='kill ...' STOMP_BROKER_START='... &' \
--   moonwire test --timeout 90 examples/protocols/stomp_reconnect_test.lua   (scripts/protocols/stomp.sh sets these)
local stomp = require "moonwire.stomp"

local URL = assert(os.getenv("STOMP_WS_URL"), "STOMP_WS_URL: RabbitMQ's Web-STOMP URL")
local STOP = assert(os.getenv("STOMP_BROKER_STOP"), "STOMP_BROKER_STOP: a shell command that stops the broker")
local START = assert(os.getenv("STOMP_BROKER_START"),
  "STOMP_BROKER_START: a shell command that starts it again in the background")

describe("STOMP across a RabbitMQ restart", function()
  it("reconnects, subscribes again, and loses nothing with client acks", function()
    local client = stomp.connect(URL, { login = "guest", passcode = "guest",
      reconnect = { initial = 0.5, factor = 1.5, max = 2, jitter = 0, attempts = 200 } })
    finally(function() client:close() end)
    local connects, closes, waiting = {}, 0, nil
    client:on_connected(function(_, info) connects[#connects + 1] = info end)
    client:on_close(function()
      closes = closes + 1
      local co = waiting
      waiting = nil
      if co then
        local ok, err = coroutine.resume(co)
        if not ok then error(err, 0) end
      end
    end)
    assert(client:wait_connected(10))

    -- A durable queue and persistent messages: they outlive the broker's restart.
    local queue = "/queue/mw-restart-" .. math.random(1 << 30)
    local sub = client:subscribe(queue, { ack = "client-individual", receipt = true,
                                          headers = { durable = "true", ["auto-delete"] = "false" } })
    assert(client:send(queue, "before", { persistent = "true", receipt = true }))
    local before = assert(sub:receive(10))
    assert.are.equal("before", before.body)
    -- Not acknowledged: the broker keeps it.

    local t0 = mw.now()
    assert(os.execute(STOP))
    waiting = coroutine.running()
    coroutine.yield() -- until on_close
    assert.are.equal(1, closes)
    local stopped = mw.now()
    -- Sent while the broker is away: it waits in the connection's queue, for CONNECTED.
    assert(client:send(queue, "while away", { persistent = "true" }))
    assert(os.execute(START))

    -- After the restart: "before" again (it was never acknowledged) and "while away".
    local bodies = {}
    for _ = 1, 2 do
      local msg = assert(sub:receive(60))
      bodies[#bodies + 1] = msg.body
      assert(msg:ack({ receipt = true }))
    end
    table.sort(bodies)
    assert.are.same({ "before", "while away" }, bodies)
    -- The acknowledgement of a message from before the restart is refused in words.
    local ok, why = before:ack()
    assert.is_nil(ok)
    assert.matches("^ACK: the message came on a connection that has closed since", why)
    assert.are.equal(2, #connects)
    assert.are.equal(0, connects[1].reconnects)
    assert.are.equal(1, connects[2].reconnects)
    assert.are.same({ sub.id }, connects[2].resubscribed)
    print(("\n    connection lost %.1f s after the stop; back, resubscribed and both messages in %.1f s after that")
      :format(stopped - t0, mw.now() - stopped))
  end)
end)
