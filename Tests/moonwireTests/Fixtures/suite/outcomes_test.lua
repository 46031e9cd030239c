-- One test of every outcome, for the runner's own tests.
describe("outcomes", function()
  it("passes", function()
    assert.are.same({ op = "welcome" }, { op = "welcome" })
  end)

  it("fails an assertion", function()
    assert.are.equal(1, 2)
  end)

  it("raises an error", function()
    error("kaboom")
  end)

  pending("is pending")

  it("waits past its timeout", function()
    mw.sleep(30)
  end)

  it("loops forever", function()
    local n = 0
    while true do n = n + 1 end
  end)

  it("waits and passes", function()
    mw.sleep(0.01)
    assert.is_true(true)
  end)
end)
