-- bench/formats/codec.lua: mw.msgpack and mw.cbor against lua-cjson's JSON (Debian's
-- lua-cjson) and mw.json on the same data, same process: decode + encode of one
-- message, in microseconds, RUNS runs each (median, min-max).
--   moonwire run bench/formats/codec.lua DIR [RUNS] [SECONDS_PER_RUN]
-- DIR holds the messages as JSON (bench/json/codec.lua --write DIR: the 31 B, 332 B and
-- 17 KB messages of the JSON benchmark); each is decoded once by mw.json and encoded in
-- each format. `--write-binary DIR` also writes them as DIR/N.msgpack and DIR/N.cbor
-- (for bench/formats/libs.c). bench/formats/run.sh does all of it.
local dir = assert(mw.args[1], "usage: codec.lua DIR [RUNS] [SECONDS]")
local write_binary = mw.args[2] == "--write-binary"
local runs = tonumber(mw.args[2]) or 3
local seconds = tonumber(mw.args[3]) or 1.0

local ok, cjson = pcall(require, "cjson")
if not ok then error("lua-cjson is not installed (apt-get install lua-cjson): " .. cjson, 0) end

local messages = {}
for i = 1, 3 do
  local f = assert(io.open(("%s/%d.json"):format(dir, i), "rb"))
  local text = f:read("a")
  f:close()
  local value = assert(mw.json.decode(text))
  messages[i] = {
    name = ({ "small", "medium", "large" })[i],
    data = { json = text, msgpack = mw.msgpack.encode(value), cbor = mw.cbor.encode(value) },
  }
  if write_binary then
    for _, format in ipairs { "msgpack", "cbor" } do
      local out = assert(io.open(("%s/%d.%s"):format(dir, i, format), "wb"))
      out:write(messages[i].data[format])
      out:close()
    end
  end
end
if write_binary then return end

local codecs = {
  { name = "mw.msgpack", format = "msgpack", decode = mw.msgpack.decode, encode = mw.msgpack.encode },
  { name = "mw.cbor", format = "cbor", decode = mw.cbor.decode, encode = mw.cbor.encode },
  { name = "mw.json", format = "json", decode = mw.json.decode, encode = mw.json.encode },
  -- lua-cjson's defaults (14 digits, floats only: not exact), the reference line.
  { name = "lua-cjson", format = "json", decode = cjson.decode, encode = cjson.encode },
}

-- Microseconds per decode + encode, over enough iterations to fill `seconds`.
local clock = os.clock
local function measure(codec, bytes)
  local decode, encode = codec.decode, codec.encode
  local n = 16
  while true do
    local t0 = clock()
    for _ = 1, n do encode(decode(bytes)) end
    local elapsed = clock() - t0
    if elapsed >= seconds then return elapsed / n * 1e6 end
    n = n * (elapsed > 0 and math.max(2, math.ceil(seconds / elapsed * 1.1)) or 16)
  end
end

local results = {}
for _, m in ipairs(messages) do
  results[m.name] = {}
  for _, codec in ipairs(codecs) do
    local bytes = m.data[codec.format]
    -- Each codec takes the message (and warms up); the binary formats give back their bytes.
    local value = assert(codec.decode(bytes), codec.name .. " cannot decode the " .. m.name .. " message")
    local again = codec.encode(value)
    assert(codec.format == "json" or again == bytes, codec.name .. " changes the " .. m.name .. " message")
    results[m.name][codec.name] = {}
  end
end
-- Interleaved: every codec on every message once per run.
for _ = 1, runs do
  for _, m in ipairs(messages) do
    for _, codec in ipairs(codecs) do
      local r = results[m.name][codec.name]
      r[#r + 1] = measure(codec, m.data[codec.format])
    end
  end
end

local function summary(list)
  local sorted = { table.unpack(list) }
  table.sort(sorted)
  return sorted[1], sorted[(#sorted + 1) // 2], sorted[#sorted]
end

print(("decode + encode of one message, µs: median of %d runs (min-max); ratio = median / lua-cjson's median"):format(runs))
print("| message (bytes: msgpack / cbor / json) | mw.msgpack | mw.cbor | mw.json | lua-cjson | msgpack / cjson | cbor / cjson |")
print("|---|---|---|---|---|---|---|")
for _, m in ipairs(messages) do
  local row = { ("| %s (%d / %d / %d) |"):format(m.name, #m.data.msgpack, #m.data.cbor, #m.data.json) }
  local mids = {}
  for _, codec in ipairs(codecs) do
    local lo, mid, hi = summary(results[m.name][codec.name])
    mids[codec.name] = mid
    row[#row + 1] = (" %.2f (%.2f-%.2f) |"):format(mid, lo, hi)
  end
  row[#row + 1] = (" %.2fx |"):format(mids["mw.msgpack"] / mids["lua-cjson"])
  row[#row + 1] = (" %.2fx |"):format(mids["mw.cbor"] / mids["lua-cjson"])
  print(table.concat(row))
end
