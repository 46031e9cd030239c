-- Limits: the script's own memory limit and callback timeout (mw.limits), and
-- what happens when a callback hits them. Run with --keep-going to see the
-- script go on after each error:
--   moonwire run --keep-going examples/limits.lua
mw.limits { memory = 16 * 1024 * 1024, callback_warning = 0.2, callback_timeout = 1 }
local limits = mw.limits()
print(("memory limit %d MiB, callbacks interrupted after %g s"):format(limits.memory >> 20, limits.callback_timeout))

-- A memory eater: an error at the line that grew the table past the limit.
mw.after(0, function()
  local hoard = {} -- luacheck: no unused (kept only to fill the memory)
  for i = 1, 1e7 do hoard[i] = string.rep("x", 1000) .. i end
end)

-- An endless loop: reported after 0.2 s, interrupted after 1 s at its line.
mw.after(0.1, function()
  while true do end
end)

-- Still served afterwards.
mw.after(0.2, function() print("the loop is free again") end)
