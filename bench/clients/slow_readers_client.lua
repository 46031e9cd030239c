-- bench/slow_readers.sh's client: N connections to a server that does not read; each
-- sends 16 KiB messages until its first refusal (its own budget, or the process's),
-- then the script waits for the server to read again and for every message taken to
-- leave, closes, and reports.
--   moonwire run [--send-budget B] slow_readers_client.lua URL N GATE
local url, n, gate = mw.args[1], tonumber(mw.args[2]) or 10000, mw.args[3]
local message = string.rep("m", 16 * 1024)

local function status(field)
  local f = assert(io.open("/proc/self/status"))
  local kib = f:read("a"):match(field .. ":%s+(%d+)")
  f:close()
  return tonumber(kib)
end

local conns, opened = {}, 0
for i = 1, n do
  conns[i] = mw.connect(url, { framing = "raw", reconnect = false, heartbeat = false })
end
for i = 1, n do
  if conns[i]:wait_open(60) then opened = opened + 1 end
end
local rss_open = status("VmRSS")

-- Fill: every connection sends until it is refused once.
local taken, own, process, other = 0, 0, 0, 0
local t0 = mw.now()
for i = 1, n do
  local c = conns[i]
  for _ = 1, 100000 do
    local ok, err = c:send(message)
    if ok then
      taken = taken + #message
    else
      if err == "queue full" then own = own + 1
      elseif err:match("^queue full %(process send budget") then process = process + 1
      else other = other + 1 end
      break
    end
  end
end
local fill = mw.now() - t0
local buffered = 0
for i = 1, n do buffered = buffered + conns[i]:stats().buffered end
local rss_full = status("VmRSS")
print(("FILLED opened=%d taken=%d refusals_own=%d refusals_process=%d refusals_other=%d buffered=%d rss_open_kib=%d rss_full_kib=%d fill_s=%.2f")
  :format(opened, taken, own, process, other, buffered, rss_open, rss_full, fill))
io.stdout:flush()

-- The bench script resumes the server's reads, then creates the gate file.
while not io.open(gate) do mw.sleep(0.05) end
local t1 = mw.now()
local drained = 0
for i = 1, n do
  if conns[i]:drain(120) then drained = drained + 1 end
end
local left
repeat
  left = 0
  for i = 1, n do
    local s = conns[i]:stats()
    left = left + s.queued + s.buffered
  end
  if left > 0 then mw.sleep(0.05) end
until left == 0
local dropped = 0
for i = 1, n do dropped = dropped + conns[i]:stats().dropped end
local empty = mw.now() - t1
for i = 1, n do conns[i]:close() end
local closed
repeat
  closed = 0
  for i = 1, n do if conns[i]:state() == "closed" then closed = closed + 1 end end
  if closed < n then mw.sleep(0.05) end
until closed == n
print(("DONE drained=%d dropped=%d empty_s=%.2f vmhwm_kib=%d budget=%d")
  :format(drained, dropped, empty, status("VmHWM"), mw.limits().send_budget))
mw.exit(0)
