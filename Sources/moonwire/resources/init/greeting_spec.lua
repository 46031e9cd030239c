-- greeting_spec.lua: a starter test, written by moonwire init. Run it with
-- moonwire test (it finds spec/, as busted does).
local greeting = require("greeting")

describe("greeting", function()
  it("says hello", function()
    assert.are.equal("hello from ann", greeting.hello("ann"))
  end)

  it("comes back from an echo server", function()
    local s = assert(mw.listen("ws://127.0.0.1:0/"))
    s:on_message(function(peer, msg) peer:send(msg) end)
    local c = mw.connect(s:url())
    local reply = assert(c:request(greeting.hello("bob"), greeting.is_reply, 5))
    assert.are.equal("hello from bob", reply)
    s:close()
  end)
end)
