-- finally(fn) runs after the test's body, whatever way it ended.
local ran = {}

describe("finally", function()
  it("runs after a passing body", function()
    finally(function() ran[#ran + 1] = "pass" end)
  end)

  it("runs after a failing body", function()
    finally(function() ran[#ran + 1] = "fail" end)
    assert.is_true(false)
  end)

  it("that errs makes the test an error", function()
    finally(function() error("finally exploded") end)
  end)

  it("ran after both", function()
    assert.are.same({ "pass", "fail" }, ran)
  end)
end)
