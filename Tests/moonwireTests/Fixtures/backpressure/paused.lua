-- A server peer paused for PAUSE seconds; a client sending 64 KiB messages as fast
-- as it can (a refusal waits a millisecond). Prints what it measured.
local PAUSE = tonumber(mw.args[1]) or 10
local function rss_mib()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("n", "n")
  f:close()
  return resident * 4096 / 1048576
end
local max_rss = rss_mib()
mw.every(0.05, function() max_rss = math.max(max_rss, rss_mib()) end)

local s = assert(mw.listen("ws://127.0.0.1:0/"))
local received, in_order = 0, true
s:on_connect(function(peer) peer:pause(PAUSE) end)
s:on_message(function(_, msg)
  received = received + 1
  if string.unpack(">I4", msg) ~= received then in_order = false end
end)

local c = mw.connect(s:url())
assert(c:wait_open(5))
local payload = string.rep("x", 64 * 1024 - 4)
local accepted, refused, max_buffered, other = 0, 0, 0, "none"
local message = string.pack(">I4", 1) .. payload
local start = mw.now()
while mw.now() - start < PAUSE do
  local ok, err = c:send(message, "binary")
  if ok then
    accepted = accepted + 1
    message = string.pack(">I4", accepted + 1) .. payload
  else
    if err ~= "queue full" then other = err end
    refused = refused + 1
    max_buffered = math.max(max_buffered, c:stats().buffered)
    mw.sleep(0.001)
  end
end
while received < accepted and c:state() == "open" do mw.sleep(0.01) end
local stats = c:stats()
print(("accepted=%d refused=%d received=%d in_order=%s other=%s dropped=%d max_buffered=%d max_rss_mib=%.1f")
  :format(accepted, refused, received, tostring(in_order), other, stats.dropped, max_buffered, max_rss))
mw.exit(0)
