-- pending("why") inside a test ends it as pending; the rest of the body never runs.
describe("pending", function()
  it("ends the test", function()
    pending("not yet")
    error("never reached")
  end)

  pending("declared pending")

  pending("declared pending with a body", function()
    error("never run")
  end)

  it("a failure in finally still counts", function()
    finally(function() assert.is_true(false) end)
    pending("later")
  end)
end)
