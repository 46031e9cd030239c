-- arg[-1] runs Lua, as busted's does: a spec can start another interpreter.
describe("arg[-1]", function()
  it("runs Lua with -e", function()
    local p = assert(io.popen(arg[-1] .. [[ -e "print(6 * 7)"]]))
    local out = p:read("*a")
    p:close()
    assert.are.equal("42\n", out)
  end)
end)
