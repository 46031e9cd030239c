-- Misuse inside a waiting call names the call's line; a timer that throws
-- while a test runs ends that test; luassert's state is reverted per test.
local server = assert(mw.listen("ws://127.0.0.1:0"))
local url = server:url()

describe("leftovers", function()
  it("a bad receive timeout", function()
    local c = mw.connect(url)
    c:receive("soon")
  end)

  it("a bad wait_open timeout", function()
    local c = mw.connect(url)
    c:wait_open("soon")
  end)

  it("a throwing timer", function()
    mw.after(0.01, function() error("timer exploded") end)
    mw.sleep(5)
  end)

  it("a timer that throws a table", function()
    mw.after(0.01, function() error({ code = 42 }) end)
    mw.sleep(5)
  end)

  it("a failing assertion in a timer", function()
    mw.after(0.01, function() assert.are.equal("a", "b") end)
    mw.sleep(5)
  end)
end)

describe("luassert's state", function()
  it("stubs os.getenv", function()
    stub(os, "getenv").returns("stubbed")
    assert.are.equal("stubbed", os.getenv("HOME"))
  end)

  it("has it back in the next test", function()
    assert.is_function(os.getenv)
  end)
end)

describe("a timer due with the test's own wait", function()
  it("still fails the test", function()
    mw.after(0.01, function() error("timer at the same time") end)
    mw.sleep(0.01)
  end)
end)
