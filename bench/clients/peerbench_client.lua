-- The peerbench workloads (rtt, pipelined, fanout) as a moonwire script.
-- Same command line and JSON line as the peers' clients in
-- ../shared/tools/peerbench (see its clients/common_args.md), so its driver can
-- run it as CLIENT_CMD='moonwire run bench/clients/peerbench_client.lua {args}'.

local function parse(argv)
  local a = {
    url = "ws://127.0.0.1:9101/", workload = "rtt", n = 100000, size = 32,
    window = 0, warmup = -1, conns = 1000, duration = 10, concurrency = 200,
    label = "moonwire", budget = 0, lockstep = 0, gate = "", stats = 1,
  }
  local numeric = { n = true, size = true, window = true, warmup = true, conns = true,
                    duration = true, concurrency = true, budget = true, lockstep = true, stats = true }
  local i = 1
  while i <= #argv do
    local key = argv[i]:match("^%-%-(.+)$")
    local value = argv[i + 1]
    if not key or value == nil then
      error("usage: --url URL --workload rtt|pipelined|fanout --n N --size S ... (bad '" .. argv[i] .. "')", 0)
    end
    a[key] = numeric[key] and math.tointeger(tonumber(value)) or value
    i = i + 2
  end
  a.type = a.type or ((a.workload == "pipelined" or a.workload == "drained") and "binary" or "text")
  if a.window == 0 then a.window = math.max(16, math.min(1024, (4 * 1048576) // math.max(1, a.size))) end
  if a.warmup < 0 then a.warmup = math.min(1000, a.n // 10) end
  return a
end

local a = parse(mw.args)
local now = mw.now
local OPTS = { heartbeat = false, reconnect = false, max_message = 256 * 1048576, connect_timeout = 120 }

local function vmhwm_kb()
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return math.tointeger(tonumber(text:match("VmHWM:%s*(%d+)")))
end

-- Waits until the file `path` exists (bench/profile.sh creates it).
local function await_gate(path)
  while true do
    local f = io.open(path)
    if f then f:close() return end
    mw.sleep(0.05)
  end
end

local function emit(result)
  result.peer, result.workload, result.n, result.size, result.type = a.label, a.workload, a.n, a.size, a.type
  result.vmhwm_kb = vmhwm_kb()
  io.stdout:write(mw.json.encode(result), "\n")
  io.stdout:flush()
end

local finished = false

local function fail(err)
  if finished then return end
  finished = true
  emit { ok = false, error = tostring(err) }
  mw.exit(1)
end

local function pct(sorted, p)
  if #sorted == 0 then return nil end
  return sorted[math.min(#sorted, math.floor(p / 100 * #sorted) + 1)]
end

local function open(url)
  local c = mw.connect(url, OPTS)
  local ok, err = c:wait_open(120)
  if not ok then fail("connect failed: " .. tostring(err)) end
  return c
end

local function finish(c, fields)
  finished = true  -- the close below is ours: its on_close is no failure
  c:close()
  emit(fields)
  mw.exit(0)
end

local function rtt()
  local msg, kind = string.rep("a", a.size), a.type
  local total, warmup = a.warmup + a.n, a.warmup
  local lat, i, t0, t_start = {}, 0, 0, 0
  local c = open(a.url)
  c:on_close(function(_, code, reason) fail("disconnected early: " .. code .. " " .. reason) end)
  c:on_message(function(conn, m)
    local t = now()
    if #m ~= a.size then return fail("bad echo length") end
    if i >= warmup then lat[i - warmup + 1] = (t - t0) * 1e6 end
    i = i + 1
    if i == warmup then t_start = now() end
    if i >= total then
      local elapsed = now() - t_start
      -- --stats 0 (bench/profile.sh): no percentiles. Sorting the latencies costs
      -- instructions that depend on their order, noise to a count per message.
      if a.stats == 0 then
        return finish(conn, { ok = true, elapsed_s = elapsed, msgs_per_s = a.n / elapsed })
      end
      table.sort(lat)
      local sum = 0
      for k = 1, #lat do sum = sum + lat[k] end
      return finish(conn, {
        ok = true, elapsed_s = elapsed, msgs_per_s = a.n / elapsed, p50_us = pct(lat, 50),
        p99_us = pct(lat, 99), max_us = lat[#lat], mean_us = sum / #lat,
      })
    end
    t0 = now()
    conn:send(msg, kind)
  end)
  t_start, t0 = now(), now()
  c:send(msg, kind)
end

-- The result of a throughput run that started at t0: fields plus the rates.
local function throughput(t0, fields)
  local elapsed = now() - t0
  fields.ok, fields.elapsed_s = true, elapsed
  fields.msgs_per_s, fields.mib_per_s = a.n / elapsed, a.n * a.size / elapsed / 1048576
  return fields
end

local function pipelined()
  local msg, kind, n, window = string.rep("a", a.size), a.type, a.n, a.window
  local refill = math.max(1, window >> 2)
  local sent, recv, t0 = 0, 0, 0
  local c = open(a.url)
  c:on_close(function(_, code, reason) fail("disconnected early: " .. code .. " " .. reason) end)
  local function pump(conn)
    while sent < n and sent - recv < window do
      conn:send(msg, kind)
      sent = sent + 1
    end
  end
  c:on_message(function(conn, m)
    if #m ~= a.size then return fail("bad echo length") end
    recv = recv + 1
    if recv >= n then return finish(conn, throughput(t0, { window = window })) end
    if window - (sent - recv) >= refill then pump(conn) end
  end)
  t0 = now()
  pump(c)
end

-- pipelined paced by the send budget instead of a window: send as fast as
-- c:send takes messages, c:drain() when it refuses ("queue full"); the echoes
-- are counted as they come. Measures what bounding the queue costs.
local function drained()
  local msg, kind, n = string.rep("a", a.size), a.type, a.n
  local recv, t0, refusals = 0, 0, 0
  -- --budget BYTES: the send budget (queue.bytes); 0 keeps the default (16 MiB)
  if a.budget > 0 then OPTS.queue = { bytes = a.budget } end
  local c = open(a.url)
  c:on_close(function(_, code, reason) fail("disconnected early: " .. code .. " " .. reason) end)
  c:on_message(function(conn, m)
    if #m ~= a.size then return fail("bad echo length") end
    recv = recv + 1
    if recv >= n then return finish(conn, throughput(t0, { refusals = refusals })) end
  end)
  t0 = now()
  local sent = 0
  while sent < n do
    if c:send(msg, kind) then
      sent = sent + 1
    else
      refusals = refusals + 1
      local ok, err = c:drain(120)
      if not ok then return fail("drain: " .. tostring(err)) end
    end
  end
end

local function fanout()
  local C = a.conns
  local cur, tick_start, got, late = -1, 0, 0, 0
  local recv_at, ticks, conns = {}, {}, {}
  local failures, next_index, connecting = 0, 1, 0

  local function on_message(conn, m)
    local t = now()
    local idx = conns[conn]
    if math.tointeger(tonumber(m:sub(1, 15))) == cur and recv_at[idx] == nil then
      recv_at[idx] = (t - tick_start) * 1e3
      got = got + 1
    else
      late = late + 1
    end
  end

  -- At most `concurrency` handshakes in flight; a failed dial is tried 3 times.
  local live = {}
  local function worker()
    while next_index <= C do
      local idx = next_index
      next_index = next_index + 1
      for attempt = 1, 3 do
        local c = mw.connect(a.url, OPTS)
        local ok, err = c:wait_open(120)
        if ok then
          conns[c] = idx
          live[#live + 1] = c
          c:on_message(on_message)
          break
        end
        c:close()
        if attempt == 3 then
          failures = failures + 1
          io.stderr:write("connect failed: ", tostring(err), "\n")
        end
      end
    end
    connecting = connecting - 1
  end

  local t0 = now()
  local workers = math.min(a.concurrency, C)
  connecting = workers
  for _ = 1, workers do mw.spawn(worker) end
  while connecting > 0 do mw.sleep(0.005) end
  local connect_s = now() - t0
  if a.gate ~= "" then
    -- bench/profile.sh fanout: say the connections are open, then wait until the
    -- profiler has started counting (it creates the gate file), so that only the
    -- rounds are counted and not the dials.
    io.stderr:write("CONNECTED\n")
    io.stderr:flush()
    await_gate(a.gate)
  end
  local pad = a.size > 16 and string.rep("x", a.size - 16) or ""

  local base = now()
  for t = 0, a.duration - 1 do
    -- lockstep (bench/profile.sh, under valgrind): no pacing and no deadline, each
    -- tick waits for every echo, so the work per tick is the same however slow.
    local target = a.lockstep == 1 and now() or base + t
    local wait = target - now()
    if wait > 0 then mw.sleep(wait) end
    cur, recv_at, got, tick_start = t, {}, 0, now()
    local m = string.format("%015d:%s", t, pad)
    for k = 1, #live do live[k]:send(m) end
    local send_ms = (now() - tick_start) * 1e3
    local deadline = a.lockstep == 1 and math.huge or target + 1
    -- (lockstep polls 25 times less often: under valgrind each poll's instructions
    -- would otherwise count against the echoes, more the slower the machine.)
    local poll = a.lockstep == 1 and 0.05 or 0.002
    while got < #live and now() < deadline do mw.sleep(poll) end
    if a.lockstep == 1 then
      -- No timing statistics under the profiler: sorting the arrival times costs
      -- instructions that depend on the order of arrival, which is noise to a count
      -- of instructions per echo.
      ticks[#ticks + 1] = { recv = got, within200 = got, send_ms = send_ms, lat_p99_ms = 0,
                            lat_max_ms = 0, spread_p99_ms = 0, spread_max_ms = 0 }
      cur = -2 - cur
      goto next_tick
    end
    local sorted = {}
    for _, v in pairs(recv_at) do sorted[#sorted + 1] = v end
    table.sort(sorted)
    local first = sorted[1] or 0
    local off, within = {}, 0
    for k = 1, #sorted do
      off[k] = sorted[k] - first
      if off[k] <= 200 then within = within + 1 end
    end
    ticks[#ticks + 1] = {
      recv = #sorted, lat_p50_ms = pct(sorted, 50), lat_p99_ms = pct(sorted, 99),
      lat_max_ms = sorted[#sorted], spread_p99_ms = pct(off, 99), spread_max_ms = off[#off],
      within200 = within, send_ms = send_ms,
    }
    cur = -2 - cur
    ::next_tick::
  end
  if a.gate ~= "" then
    -- Nor the teardown: closing every connection is not an echo.
    io.stderr:write("ROUNDS\n")
    io.stderr:flush()
    await_gate(a.gate .. ".done")
  end

  local expected, received, within, p50s, pass = #ticks * #live, 0, 0, {}, #live > 0
  local function mx(key)
    local m
    for _, t in ipairs(ticks) do
      local v = t[key] or math.huge
      if m == nil or v > m then m = v end
    end
    return m
  end
  for _, t in ipairs(ticks) do
    received, within = received + t.recv, within + t.within200
    if t.lat_p50_ms then p50s[#p50s + 1] = t.lat_p50_ms end
    if t.within200 < 0.99 * #live then pass = false end
  end
  table.sort(p50s)
  emit {
    ok = failures == 0 and received == expected, conns = C, connected = #live,
    connect_failures = failures, duration = a.duration, connect_s = connect_s, ticks = #ticks,
    expected = expected, received = received, late = late, lat_p50_ms_med = pct(p50s, 50),
    lat_p99_ms_max = mx("lat_p99_ms"), lat_max_ms = mx("lat_max_ms"),
    spread_p99_ms_max = mx("spread_p99_ms"), spread_max_ms = mx("spread_max_ms"),
    send_ms_max = mx("send_ms"), within200_frac = expected > 0 and within / expected or 0,
    pass_spread200_p99 = pass,
  }
  mw.exit(0)
end

-- The JSON echo bot: the 332-byte trade message (bench/json/trade.json) pipelined with
-- `window` in flight over codec = "json": every echo arrives decoded, a field is read,
-- and the table goes back out (encoded into the frame) until n echoes came.
local function json()
  local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
  local f = assert(io.open(dir .. "/../json/trade.json", "rb"))
  local template = assert(mw.json.decode(f:read("a")))
  f:close()
  OPTS.codec = "json"
  local n, window = a.n, a.window
  local sent, recv, t0 = 0, 0, 0
  local c = open(a.url)
  c:on_close(function(_, code, reason) fail("disconnected early: " .. code .. " " .. reason) end)
  c:on_error(function(_, err) fail(err) end)
  c:on_message(function(conn, msg)
    if msg.seq == nil then return fail("bad echo") end
    recv = recv + 1
    if recv >= n then return finish(conn, throughput(t0, { window = window })) end
    if sent < n then
      conn:send(msg)
      sent = sent + 1
    end
  end)
  t0 = now()
  while sent < n and sent < window do
    c:send(template)
    sent = sent + 1
  end
end

local workloads = { rtt = rtt, pipelined = pipelined, drained = drained, fanout = fanout, json = json }
local run = workloads[a.workload] or error("unknown workload '" .. tostring(a.workload) .. "'", 0)
run()
