-- Four tests; the first fails while its connection is still dialing. The
-- other three must still run and pass: "3 passed, 1 failed".
local server = assert(mw.listen("ws://127.0.0.1:0"))
server:on_message(function(peer, m) peer:send(m) end)

describe("dialing", function()
  it("fails while its connection dials", function()
    mw.connect(server:url())
    assert.are.equal(1, 2)
  end)

  it("talks over a new connection", function()
    local c = mw.connect(server:url())
    assert.are.equal("hi", c:request("hi", "^hi$", 5))
  end)

  it("needs no connection", function()
    assert.is_true(true)
  end)

  it("opens one more", function()
    assert(mw.connect(server:url()):wait_open(5))
  end)
end)
