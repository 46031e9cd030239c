-- future_test.lua: mw.future, the wait primitive of scripts and of the shipped
-- protocol modules.
--   moonwire test examples/tests
describe("mw.future", function()
  it("wakes every waiter with the values, in the order they waited", function()
    local f = mw.future()
    local order = {}
    for i = 1, 3 do
      mw.spawn(function()
        local a, b, c = f:wait()
        order[#order + 1] = { i, a, b, c }
      end)
    end
    assert.is_false(f:is_set())
    mw.after(0, function() assert.is_true(f:set(1, nil, "three")) end)
    assert.are.same({ 1, nil, "three" }, { f:wait(2) })
    assert.are.same({ { 1, 1, nil, "three" }, { 2, 1, nil, "three" }, { 3, 1, nil, "three" } }, order)
  end)

  it("is set once: later waits return at once, a second set is refused", function()
    local f = mw.future()
    assert.is_true(f:set("first"))
    assert.is_false(f:set("second"))
    assert.are.equal("first", f:wait())
    assert.is_true(f:is_set())
  end)

  it("times out one wait without setting the future", function()
    local f = mw.future()
    local started = mw.now()
    local value, err = f:wait(0.05)
    assert.is_nil(value)
    assert.are.equal("timeout", err)
    assert.is_true(mw.now() - started >= 0.05)
    assert.is_false(f:is_set())
    -- A set after the timeout still counts for the next wait.
    mw.after(0, function() f:set("late") end)
    assert.are.equal("late", f:wait(2))
  end)

  it("keeps a waiter that times out apart from one that does not", function()
    local f = mw.future()
    local got
    mw.spawn(function() got = { f:wait(5) } end)
    assert.are.same({ nil, "timeout" }, { f:wait(0.01) })
    f:set("done")
    assert.are.same({ "done" }, got)
  end)

  it("blames misuse on the caller's line", function()
    local f = mw.future("answer")
    local ok, err = pcall(f.wait, f, "soon")
    assert.is_false(ok)
    assert.matches("bad argument to 'answer' %(timeout: seconds expected, got string%)", err)
    ok, err = pcall(f.set, {})
    assert.is_false(ok)
    assert.matches("bad self to 'f:set' %(a future from mw.future expected, got table%)", err)
    assert.has_error(function() mw.future(42) end, "bad argument #1 to 'mw.future' (string expected, got number)")
    -- A callback cannot wait: the error names the callback's line.
    local line
    mw.after(0, function()
      line = debug.getinfo(1, "l").currentline + 1
      ok, err = pcall(f.wait, f)
    end)
    mw.sleep(0.01)
    assert.is_false(ok)
    assert.matches("future_test.lua:" .. line .. ": answer: only inside a coroutine", err)
  end)
end)
