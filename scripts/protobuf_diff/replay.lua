-- Replays the protobuf fuzz target's seeds and kept crash inputs in an ordinary
-- build (scripts/protobuf_diff.sh): the same checks (Fuzz/MoonwireFuzz/lua_protobuf.lua)
-- through mw.protobuf as scripts see it.
--   moonwire run scripts/protobuf_diff/replay.lua FILE...
local check = assert(loadfile("Fuzz/MoonwireFuzz/lua_protobuf.lua"))(mw.protobuf, "scripts/protobuf_diff")
for _, path in ipairs(mw.args) do
  local f = assert(io.open(path, "rb"))
  local input = f:read("a")
  f:close()
  local ok, err = pcall(check, input)
  if not ok then error(path .. ": " .. tostring(err), 0) end
end
print(("replay.lua: %d fuzz inputs, no broken promise"):format(#mw.args))
