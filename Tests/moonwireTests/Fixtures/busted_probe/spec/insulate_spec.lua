-- A file-level insulate, expose, and what insulate undoes.
insulate("insulated", function()
  PROBE_INSULATED = true
  package.loaded.probe_fake = { fake = true }

  it("sees its own global", function()
    assert.is_true(PROBE_INSULATED)
  end)
end)

describe("after the insulate block", function()
  it("its global is gone", function()
    assert.is_nil(PROBE_INSULATED)
    assert.is_nil(package.loaded.probe_fake)
  end)
end)

expose("exposed", function()
  PROBE_EXPOSED = true
  it("sees its global", function()
    assert.is_true(PROBE_EXPOSED)
  end)
end)

describe("after the expose block", function()
  it("its global stays", function()
    assert.is_true(PROBE_EXPOSED)
  end)
end)
