-- lazy_/strict_ setup and teardown, randomize, the helper and --lpath.
local log = {}

describe("setup kinds", function()
  lazy_setup(function() log[#log + 1] = "lazy_setup" end)
  strict_setup(function() log[#log + 1] = "strict_setup" end)
  lazy_teardown(function() end)
  strict_teardown(function() end)

  it("ran both setups", function()
    table.sort(log)
    assert.are.same({ "lazy_setup", "strict_setup" }, log)
  end)
end)

describe("randomized", function()
  randomize()
  local seen = {}
  for i = 1, 5 do
    it("test " .. i, function() seen[#seen + 1] = i end)
  end
end)

describe("paths", function()
  it("the helper ran first", function() assert.are.equal("loaded", PROBE_HELPER) end)
  it("--lpath finds lib/", function() assert.are.equal(42, require("probe_lib").answer) end)
end)
