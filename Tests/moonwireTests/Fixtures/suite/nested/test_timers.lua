-- A timer a test leaves behind is cancelled after it.
local fired = false

test("leaves a timer behind", function()
  mw.after(0.05, function() fired = true end)
end)

test("the timer never fired", function()
  mw.sleep(0.1)
  assert.is_false(fired)
end)
