-- A server broadcasting N messages to FAST clients that read and to stalled raw-socket
-- clients that never read (opened by the test once "ready" is printed). Paced by the
-- fast clients: every 50 messages it waits until they have them all.
local N, FAST = 2000, 10
local function rss_mib()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("n", "n")
  f:close()
  return resident * 4096 / 1048576
end
local max_rss = rss_mib()

local s = assert(mw.listen("ws://127.0.0.1:0/", { queue = { bytes = 256 * 1024 } }))
local closer = assert(mw.listen("ws://127.0.0.1:0/", { queue = { bytes = 256 * 1024 }, slow_peer = "close", close_timeout = 0.5 }))
local peers, closer_peer, closed_with = {}, nil, nil
s:on_connect(function(peer) peers[#peers + 1] = peer end)
closer:on_connect(function(peer) closer_peer = peer end)
closer:on_close(function(_, code, reason) closed_with = code .. " " .. reason end)

local counts, ordered = {}, true
for i = 1, FAST do
  counts[i] = 0
  local c = mw.connect(s:url())
  c:on_message(function(_, msg)
    counts[i] = counts[i] + 1
    if string.unpack(">I4", msg) ~= counts[i] then ordered = false end
  end)
end
while #peers < FAST do mw.sleep(0.01) end
print("ready " .. s:url():match(":(%d+)/") .. " " .. closer:url():match(":(%d+)/"))
while #peers < FAST + 1 or not closer_peer do mw.sleep(0.01) end
local stalled = peers[FAST + 1]

local payload = string.rep("b", 4096 - 4)
local took = 0
for i = 1, N do
  took = took + s:broadcast(string.pack(">I4", i) .. payload)
  if i % 50 == 0 then
    local function behind()
      for j = 1, FAST do if counts[j] < i then return true end end
    end
    while behind() do mw.sleep(0.001) end
    max_rss = math.max(max_rss, rss_mib())
  end
end
local fast_all = true
for j = 1, FAST do if counts[j] ~= N then fast_all = false end end
local st = stalled:stats()
print(("fast_all=%s ordered=%s took=%d stalled_sent=%d stalled_queued=%d stalled_dropped=%d max_rss_mib=%.1f")
  :format(tostring(fast_all), tostring(ordered), took, st.sent, st.queued, st.dropped, max_rss))

-- slow_peer = "close": broadcast to the stalled client until it is closed (a
-- broadcast no peer took), then wait for on_close.
local sent, block = 0, string.rep("c", 4096)
while closer:broadcast(block) > 0 do
  sent = sent + 1
  if sent % 50 == 0 then mw.sleep(0.001) end
end
while not closed_with do mw.sleep(0.01) end
print(("closed_with=%s after=%d"):format((tostring(closed_with):gsub(" ", "_")), sent))
mw.exit(0)
