-- bench/protobuf/codec.lua: mw.protobuf decode + encode of one message, against
-- mw.json and Debian's lua-cjson on the same data (as JSON text), same process,
-- in microseconds per message, RUNS runs each (min, median, max).
--   moonwire run bench/protobuf/codec.lua [RUNS] [SECONDS_PER_RUN]   (bench/protobuf/run.sh)
local runs = tonumber(mw.args[1]) or 3
local seconds = tonumber(mw.args[2]) or 1.0
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
mw.protobuf.load(here .. "/bench.proto")
local has_cjson, cjson = pcall(require, "cjson")

local messages = {}
messages[#messages + 1] = { name = "small", type = "bench.Pong",
  value = { op = "pong", id = 9007199254740993, ok = true, note = "all good, see you" } }
do
  local bids, asks = {}, {}
  for i = 1, 6 do
    bids[i] = { px = 91234.0 - i * 0.5, qty = 0.25 * i, orders = i }
    asks[i] = { px = 91235.0 + i * 0.5, qty = 0.125 * i, orders = 10 + i }
  end
  messages[#messages + 1] = { name = "medium", type = "bench.Trade", value = {
    type = "trade", seq = 9007199254740993, ts = 1732540000123456789, sym = "BTC-EUR", px = 91234.5,
    qty = 0.0125, side = "buy", note = "café ✓ settled on the main venue", bids = bids, asks = asks,
    tags = { "spot", "eu", "maker" }, venue = { id = "7", name = "mx", region = "eu-west" } } }
end
do
  local users = {}
  for i = 1, 450 do
    users[i] = { id = 100000 + i, name = ("user-%04d"):format(i), score = i * 3 + 0.5, active = i % 2 == 0,
      tags = { "a", "b" }, region = "eu" }
  end
  messages[#messages + 1] = { name = "large", type = "bench.Users", value = { users = users } }
end

local function time_per_call(fn, arg)
  local clock = os.clock
  local n, start = 0, clock()
  local batch = 16
  while true do
    for _ = 1, batch do fn(arg) end
    n = n + batch
    local elapsed = clock() - start
    if elapsed >= seconds then return elapsed / n * 1e6 end
    if elapsed < seconds / 10 then batch = batch * 2 end
  end
end

local function summary(samples)
  table.sort(samples)
  return samples[1], samples[(#samples + 1) // 2], samples[#samples]
end

print("| message | bytes (protobuf / JSON) | codec | decode + encode, µs (min / median / max) |")
print("|---|---|---|---|")
for _, m in ipairs(messages) do
  local pbytes = mw.protobuf.encode(m.type, m.value)
  local text = mw.json.encode(m.value)
  local tname = m.type
  local pdecode, pencode = mw.protobuf.decode, mw.protobuf.encode
  local codec_fn = mw.protobuf.codec(tname)
  local cases = {
    { "mw.protobuf", function(b) return pencode(tname, pdecode(tname, b)) end, pbytes },
    { "mw.protobuf codec table", function(b) return codec_fn.encode(codec_fn.decode(b)) end, pbytes },
    { "mw.json", function(s) return mw.json.encode(mw.json.decode(s)) end, text },
  }
  if has_cjson then cases[#cases + 1] = { "lua-cjson", function(s) return cjson.encode(cjson.decode(s)) end, text } end
  for _, case in ipairs(cases) do
    local samples = {}
    for r = 1, runs do samples[r] = time_per_call(case[2], case[3]) end
    local lo, mid, hi = summary(samples)
    print(("| %s | %d / %d | %s | %.2f / %.2f / %.2f |"):format(m.name, #pbytes, #text, case[1], lo, mid, hi))
  end
end
