-- spy, stub, mock and match are globals; context and spec are describe and it.
context("doubles", function()
  spec("a spy records calls", function()
    local s = spy.new(function() end)
    s(1, "x")
    assert.spy(s).was.called(1)
    assert.spy(s).was.called_with(1, match.is_string())
  end)

  it("a stub answers", function()
    local t = { f = function() return 1 end }
    stub(t, "f").returns(2)
    assert.are.equal(2, t.f())
    assert.stub(t.f).was.called()
  end)

  it("a mock spies on a table", function()
    local t = mock({ f = function(x) return x end })
    t.f(3)
    assert.spy(t.f).was.called_with(3)
  end)

  it("a spy that was not called fails", function()
    assert.spy(spy.new(function() end)).was.called()
  end)

  it("match rejects", function()
    local s = spy.new(function() end)
    s(1)
    assert.spy(s).was.called_with(match.is_string())
  end)
end)
