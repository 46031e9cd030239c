-- bench/json/codec.lua: mw.json against Debian's lua-cjson and lua-dkjson (and json.lua,
-- the pure-Lua mw.json it replaced), same process, same messages: decode + encode of
-- one message, in microseconds, RUNS runs each (min, median, max).
--   moonwire run bench/json/codec.lua [RUNS] [SECONDS_PER_RUN]   (bench/json/run.sh builds and runs it)
--   moonwire run bench/json/codec.lua --write DIR      the messages as files, for bench/json/parsers.cpp
-- Needs lua-cjson (apt: lua-cjson); lua-dkjson is measured when installed.
local write_to = mw.args[1] == "--write" and mw.args[2]
local runs = tonumber(mw.args[1]) or 3
local seconds = tonumber(mw.args[2]) or 1.0

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local root = here .. "/../.."

local codecs = {}
codecs[#codecs + 1] = { name = "mw.json", decode = mw.json.decode, encode = mw.json.encode }
local ok, cjson = pcall(require, "cjson")
if not ok then error("lua-cjson is not installed (apt-get install lua-cjson): " .. cjson, 0) end
-- lua-cjson's defaults; its encode writes 14 digits (not exact), its decode gives floats only.
codecs[#codecs + 1] = { name = "lua-cjson", decode = cjson.decode, encode = cjson.encode }
local has_dk, dkjson = pcall(require, "dkjson")
if has_dk then
  codecs[#codecs + 1] = { name = "lua-dkjson", decode = function(s) return (dkjson.decode(s)) end, encode = function(v) return dkjson.encode(v) end }
end
local old = assert(loadfile(root .. "/Sources/MoonwireLua/resources/json.lua"))()
codecs[#codecs + 1] = { name = "json.lua", decode = old.decode, encode = old.encode }

-- The issue's three messages (31, 332 and 17 465 bytes), and one of ours: an exchange
-- feed update (1 024 bytes) that is mostly floats.
local messages = {}
messages[#messages + 1] = { name = "31 B", text = '{"op":"pong","id":42,"ok":true}' }
messages[#messages + 1] = { name = "332 B", text = table.concat({
  '{"type":"trade","seq":9007199254740993,"ts":1732540000123456789,"sym":"BTC-EUR",',
  '"px":91234.5,"qty":0.0125,"side":"buy","note":"caf\\u00e9 \\u2713",',
  '"book":{"bids":[[91234.0,1.5],[91233.5,0.25],[91233.0,3.0]],',
  '"asks":[[91235.0,0.75],[91235.5,2.0],[91236.0,0.1]]},',
  '"tags":["spot","eu"],"venue":{"id":7,"name":"mx","open":true},"meta":null}' }) }
do
  local items = {}
  for i = 1, 200 do
    items[i] = ('{"id":%d,"name":"user-%04d","score":%d.5,"active":%s,"tags":["a","b"],"r":"eu"}')
      :format(100000 + i, i, i * 3, i % 2 == 0 and "true" or "false")
  end
  messages[#messages + 1] = { name = "17 KB", text = "[" .. table.concat(items, ",") .. "]" }
end
do
  local levels = {}
  for i = 1, 40 do
    levels[i] = ('[%.2f,%.6f,%d]'):format(27000 + i * 0.25, 0.001 * i + 0.000317, i * 7)
  end
  messages[#messages + 1] = { name = "1 KB feed (ours)", text = '{"e":"depthUpdate","E":1732540000123,"s":"BTCUSDT","U":157,"u":160,"b":['
    .. table.concat(levels, ",", 1, 20) .. '],"a":[' .. table.concat(levels, ",", 21, 40) .. ']}' }
end
for _, m in ipairs(messages) do m.size = #m.text end
if write_to then
  for i, m in ipairs(messages) do
    local f = assert(io.open(("%s/%d.json"):format(write_to, i), "wb"))
    f:write(m.text)
    f:close()
  end
  return
end

-- Microseconds per decode + encode, best of enough iterations to fill `seconds`.
local clock = os.clock
local function measure(codec, text)
  local decode, encode = codec.decode, codec.encode
  local n = 16
  while true do
    local t0 = clock()
    for _ = 1, n do encode(decode(text)) end
    local elapsed = clock() - t0
    if elapsed >= seconds then return elapsed / n * 1e6 end
    n = n * (elapsed > 0 and math.max(2, math.ceil(seconds / elapsed * 1.1)) or 16)
  end
end

local results = {}
for _, m in ipairs(messages) do
  results[m.name] = {}
  for _, codec in ipairs(codecs) do
    -- Check that each codec takes the message (and warm it up).
    assert(codec.decode(m.text), codec.name .. " cannot decode the " .. m.name .. " message")
    results[m.name][codec.name] = {}
  end
end
-- Runs interleaved: every codec on every message once per run, so that a slow moment
-- of the machine hits all of them alike.
for _ = 1, runs do
  for _, m in ipairs(messages) do
    for _, codec in ipairs(codecs) do
      local r = results[m.name][codec.name]
      r[#r + 1] = measure(codec, m.text)
    end
  end
end

local function summary(list)
  local sorted = { table.unpack(list) }
  table.sort(sorted)
  return sorted[1], sorted[(#sorted + 1) // 2], sorted[#sorted]
end

print(("decode + encode of one message, µs: median of %d runs (min-max); ratio = median / lua-cjson's median"):format(runs))
local header = { "| message |" }
for _, codec in ipairs(codecs) do header[#header + 1] = (" %s |"):format(codec.name) end
header[#header + 1] = " mw.json / lua-cjson |"
print(table.concat(header))
print("|---" .. ("|---"):rep(#codecs + 1) .. "|")
local worst = 0
for _, m in ipairs(messages) do
  local row = { ("| %s (%d bytes) |"):format(m.name, m.size) }
  local base = select(2, summary(results[m.name]["lua-cjson"]))
  local mine
  for _, codec in ipairs(codecs) do
    local lo, mid, hi = summary(results[m.name][codec.name])
    if codec.name == "mw.json" then mine = mid end
    row[#row + 1] = (" %.2f (%.2f-%.2f) |"):format(mid, lo, hi)
  end
  local ratio = mine / base
  -- The ratio's range: each run's mw.json time over the same run's lua-cjson time.
  local ratios = {}
  for i = 1, runs do ratios[i] = results[m.name]["mw.json"][i] / results[m.name]["lua-cjson"][i] end
  local rlo, _, rhi = summary(ratios)
  if rhi > worst then worst = rhi end
  row[#row + 1] = (" %.2fx (%.2f-%.2f) |"):format(ratio, rlo, rhi)
  print(table.concat(row))
end
print(("worst run's ratio: %.2fx (target: at most 1.0x on every message)"):format(worst))
