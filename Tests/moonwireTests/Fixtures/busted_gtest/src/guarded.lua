-- A module under test that uses Lua's own assert, as libraries do: its
-- failure is the message string, not a luassert failure.
local guarded = {}

function guarded.walk(depth)
  assert(depth < 3, "recursion detected")
  return depth
end

return guarded
