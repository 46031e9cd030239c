-- Modules under test keep Lua's assert; the spec's assert is luassert's.
local guarded = require("guarded")

describe("a module's assert", function()
  it("raises its message as a string", function()
    assert.has_error(function() guarded.walk(5) end, "recursion detected")
    local ok, err = pcall(guarded.walk, 5)
    assert.is_false(ok)
    assert.are.equal("string", type(err))
  end)

  it("lets a good call through", function()
    assert.are.equal(1, guarded.walk(1))
  end)

  it("is not luassert's in the module", function()
    assert.is_not.equal(assert, require("guarded_env").assert)
  end)
end)
