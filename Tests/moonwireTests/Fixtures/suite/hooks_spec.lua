-- Hooks: order across nested describes, and a failing before_each.
local log = {}

describe("hooks", function()
  setup(function() log[#log + 1] = "setup" end)
  before_each(function() log[#log + 1] = "before" end)
  after_each(function() log[#log + 1] = "after" end)
  teardown(function() log[#log + 1] = "teardown" end)

  it("runs first", function() log[#log + 1] = "first" end)

  describe("nested", function()
    before_each(function() log[#log + 1] = "inner before" end)
    it("sees the outer hooks first", function()
      assert.are.same({ "setup", "before", "first", "after", "before", "inner before" }, log)
    end)
  end)
end)

describe("broken hook", function()
  before_each(function() error("hook exploded") end)
  it("fails because of its hook", function() end)
end)

test("flat form works too", function() end)
