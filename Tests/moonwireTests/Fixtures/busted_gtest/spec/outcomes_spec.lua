-- One test of each outcome, nested, as busted's gtest handler prints them.
describe("outcomes", function()
  describe("nested", function()
    it("passes", function() assert.is_true(true) end)
    it("fails", function() assert.are.equal(1, 2) end)
  end)
  it("errs", function() error("boom") end)
  pending("is declared pending")
  it("is pending inside", function() pending("not yet") end)
end)

it("passes at the top level", function() assert.are.same({ 1 }, { 1 }) end)
