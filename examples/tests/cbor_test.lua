-- cbor_test.lua: mw.cbor and codec = "cbor", run by `moonwire test`. It starts its
-- own servers on 127.0.0.1 (one with the codec, one that sends raw bytes), so it
-- needs no outside network. scripts/formats/diff.py checks the same codec against
-- Python's cbor2 (equal values both ways).
--   moonwire test examples/tests
local cbor = mw.cbor

local function hex(s) return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end
local function unhex(h) return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end)) end

-- Equal values of the same kinds: integer or float (floats by their bits), array or
-- map, bytes or string, tags.
local function same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) == "number" then
    return math.type(a) == math.type(b) and string.pack("<n", a) == string.pack("<n", b)
  end
  if type(a) ~= "table" then return a == b end
  if getmetatable(a) ~= getmetatable(b) then return false end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local values = {
  0, 23, 24, 255, 256, 65535, 65536, 4294967295, 4294967296, math.maxinteger,
  -1, -24, -25, -256, -257, -65537, math.mininteger,
  0.0, -0.0, 1.5, 1 / 0, -1 / 0, 0 / 0, 2 ^ 53, 5e-324,
  "", "héllo", string.rep("x", 300), cbor.bytes(""), cbor.bytes("\0\1\255"),
  true, false, cbor.null, cbor.array(), cbor.object(),
  cbor.array { 1, "two", cbor.array {} }, cbor.object { a = 1, [2] = "b", [true] = cbor.object {} },
  cbor.tagged(4000, "x"), cbor.tagged(1, 1700000000), cbor.tagged(2, cbor.bytes("\1\0\0\0\0\0\0\0\0")),
}

describe("mw.cbor", function()
  it("writes the shortest heads and float64 floats", function()
    local expect = {
      [0] = "00", [23] = "17", [24] = "1818", [256] = "190100", [65536] = "1a00010000",
      [4294967296] = "1b0000000100000000", [-1] = "20", [-25] = "3818",
      [math.mininteger] = "3b7fffffffffffffff",
    }
    for v, h in pairs(expect) do assert.are.equal(h, hex(cbor.encode(v))) end
    assert.are.equal("fb3ff8000000000000", hex(cbor.encode(1.5)))
    assert.are.equal("fb8000000000000000", hex(cbor.encode(-0.0)))
  end)

  it("keeps every kind through encode and decode", function()
    for i, v in ipairs(values) do
      local back, err = cbor.decode(cbor.encode(v))
      assert.is_nil(err)
      assert.is_true(same(v, back), ("value %d: %s"):format(i, tostring(v)))
    end
  end)

  it("reads what other encoders write: half floats, indefinite lengths, undefined", function()
    assert.are.equal(1.0, cbor.decode(unhex("f93c00")))
    assert.are.equal(-2.0 ^ -24, cbor.decode(unhex("f98001")))
    assert.are.equal(1 / 0, cbor.decode(unhex("f97c00")))
    assert.is_true(same(cbor.array { 1, 2 }, cbor.decode(unhex("9f0102ff"))))
    assert.are.equal("abc", cbor.decode(unhex("7f6161626263ff")))
    assert.are.equal("ab", cbor.decode(unhex("5f41614162ff")).data)
    assert.is_true(same(cbor.object { a = 1 }, cbor.decode(unhex("bf616101ff"))))
    assert.are.equal(cbor.null, cbor.decode(unhex("f7")))
  end)

  it("keeps an unknown tag with its value", function()
    local v = assert(cbor.decode(unhex("d90fa0a1616101")))
    assert.are.equal(4000, v.tag)
    assert.are.equal(1, v.value.a)
    assert.are.equal("d90fa0a1616101", hex(cbor.encode(v)))
  end)

  it("tells bytes from strings and an empty array from an empty map", function()
    assert.are.equal("4201ff", hex(cbor.encode(cbor.bytes("\1\255"))))
    assert.are.equal("626869", hex(cbor.encode("hi")))
    assert.are.equal("80", hex(cbor.encode(cbor.array())))
    assert.are.equal("a0", hex(cbor.encode({})))
    assert.are.equal("\1\255", cbor.decode(unhex("4201ff"), { bytes = "string" }))
  end)

  it("refuses bad input in words, with the path and the byte", function()
    local cases = {
      { "8301", "value: an array of 3 items with 1 bytes left (byte 1)" },
      { "a1616182", "value.a: an array of 2 items with 0 bytes left (byte 4)" },
      { "1bffffffffffffffff", "value: the integer 18446744073709551615 is past Lua's integers (-2^63 to 2^63-1) (byte 0)" },
      { "5a80000000", "value: truncated: a byte string of 2147483648 bytes with 0 left (byte 5)" },
      { "62fffe", "value: a text string is not valid UTF-8 (byte 1)" },
      { "ff", "value: a break outside an indefinite-length item (byte 0)" },
      { "f0", "value: the simple value 16 has no Lua form (byte 0)" },
    }
    for _, case in ipairs(cases) do
      local v, err = cbor.decode(unhex(case[1]))
      assert.is_nil(v)
      assert.are.equal(case[2], err)
    end
    local v, err = cbor.decode(string.rep("\x81", 10000) .. "\1")
    assert.is_nil(v)
    assert.truthy(err:find("nested more than 500 levels deep", 1, true))
  end)
end)

describe('codec = "cbor"', function()
  local server, raw_server

  setup(function()
    server = assert(mw.listen("ws://127.0.0.1:0/", { codec = "cbor" }))
    server:on_message(function(peer, msg) peer:send(msg) end)
    raw_server = assert(mw.listen("ws://127.0.0.1:0/"))
    raw_server:on_message(function(peer) peer:send("\xff", "binary") end)
  end)

  teardown(function()
    server:close()
    raw_server:close()
  end)

  it("carries every kind over a real socket, in binary frames", function()
    local c = mw.connect(server:url(), { codec = "cbor" })
    for i, v in ipairs(values) do
      assert(c:send(cbor.array { i, v }))
      local back = assert(c:receive(5))
      assert.are.equal(i, back[1])
      assert.is_true(same(v, back[2]), ("value %d: %s"):format(i, tostring(v)))
    end
    c:close()
  end)

  it("reports a message that does not decode: receive returns nil and the error", function()
    local c = mw.connect(raw_server:url(), { codec = "cbor" })
    assert(c:send({ hello = true }))
    local msg, err = c:receive(5)
    assert.is_nil(msg)
    assert.are.equal("decode: value: a break outside an indefinite-length item (byte 0)", err)
    c:close()
  end)
end)
