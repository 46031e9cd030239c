-- timers.lua: one-shot and repeating timers, and coroutines that sleep.
-- The script ends by itself once the last timer is done.
--   moonwire run examples/timers.lua
local ticks = 0
mw.every(0.1, function(timer)
  ticks = ticks + 1
  local n = ticks
  print("tick " .. n)
  if n == 3 then timer:cancel() end   -- a repeating timer runs until cancelled
end)

mw.after(0.25, function() print("after 250 ms") end)

mw.spawn(function()
  for i = 1, 2 do
    mw.sleep(0.15)                    -- waits without blocking the ticks
    print("worker woke " .. i)
  end
end)

do
  local never <close> = mw.after(0.01, function() print("not printed") end) -- luacheck: no unused
end                                   -- <close> cancels it when the block ends
