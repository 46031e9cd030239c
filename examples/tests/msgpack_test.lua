-- msgpack_test.lua: mw.msgpack and codec = "msgpack", run by `moonwire test`.
-- It starts its own servers on 127.0.0.1 (one with the codec, one that sends raw
-- bytes), so it needs no outside network. scripts/formats/diff.py checks the same
-- codec byte for byte against Python's msgpack.
--   moonwire test examples/tests
local msgpack = mw.msgpack

local function hex(s) return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end
local function unhex(h) return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end)) end

-- Equal values of the same kinds: integer or float (floats by their bits), array or
-- map, bytes or string.
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
  0, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296, math.maxinteger,
  -1, -32, -33, -128, -129, -32768, -32769, -2147483648, -2147483649, math.mininteger,
  0.0, -0.0, 1.5, 1 / 0, -1 / 0, 0 / 0, 2 ^ 53, 5e-324,
  "", "héllo", string.rep("x", 300), msgpack.bin(""), msgpack.bin("\0\1\255"),
  true, false, msgpack.null, msgpack.array(), msgpack.object(),
  msgpack.array { 1, "two", msgpack.array {} }, msgpack.object { a = 1, [2] = "b", [true] = msgpack.object {} },
  msgpack.ext(5, "abcd"),
}

describe("mw.msgpack", function()
  it("writes msgpack-python's smallest integer encodings and float64 floats", function()
    local expect = {
      [0] = "00", [127] = "7f", [128] = "cc80", [256] = "cd0100", [65536] = "ce00010000",
      [4294967296] = "cf0000000100000000", [-1] = "ff", [-32] = "e0", [-33] = "d0df",
      [-129] = "d1ff7f", [-32769] = "d2ffff7fff", [math.mininteger] = "d38000000000000000",
    }
    for v, h in pairs(expect) do assert.are.equal(h, hex(msgpack.encode(v))) end
    assert.are.equal("cb3ff8000000000000", hex(msgpack.encode(1.5)))
    assert.are.equal("cb8000000000000000", hex(msgpack.encode(-0.0)))
  end)

  it("keeps every kind through encode and decode", function()
    for i, v in ipairs(values) do
      local back, err = msgpack.decode(msgpack.encode(v))
      assert.is_nil(err)
      assert.is_true(same(v, back), ("value %d: %s"):format(i, tostring(v)))
    end
  end)

  it("tells bytes from strings and an empty array from an empty map", function()
    assert.are.equal("c40201ff", hex(msgpack.encode(msgpack.bin("\1\255"))))
    assert.are.equal("a26869", hex(msgpack.encode("hi")))
    assert.are.equal("90", hex(msgpack.encode(msgpack.array())))
    assert.are.equal("80", hex(msgpack.encode({})))
    local t = msgpack.decode(unhex("82a16190a16280"))
    assert.are.equal(getmetatable(msgpack.array()), getmetatable(t.a))
    assert.are.equal(getmetatable(msgpack.object()), getmetatable(t.b))
    assert.are.equal("\1\255", msgpack.decode(unhex("c40201ff")).data)
    assert.are.equal("\1\255", msgpack.decode(unhex("c40201ff"), { bytes = "string" }))
  end)

  it("writes map keys sorted by their encoded bytes, the same bytes every time", function()
    local v = { zeta = 1, a = 2, bb = 3, [5] = 4, [-1] = 5 }
    -- 5 (05) < "a" (a161) < "bb" (a26262) < "zeta" (a47a657461) < -1 (ff)
    assert.are.equal("850504a16102a2626203a47a65746101ff05", hex(msgpack.encode(v)))
  end)

  it("refuses bad input in words, with the path and the byte", function()
    local cases = {
      { "9301", "value: an array of 3 items with 1 bytes left (byte 1)" },
      { "92a161", "value[2]: truncated: a value needs 1 bytes, 0 left (byte 3)" },
      { "81a16192a2fffe", "value.a[1]: a str is not valid UTF-8 (byte 5)" },
      { "cfffffffffffffffff", "value: the integer 18446744073709551615 is past Lua's integers (-2^63 to 2^63-1) (byte 0)" },
      { "c680000000", "value: truncated: a bin needs 2147483648 bytes, 0 left (byte 5)" },
      { "c1", "value: 0xc1 is not a MessagePack type (byte 0)" },
      { "0102", "value: 1 bytes after the MessagePack value (byte 1)" },
    }
    for _, case in ipairs(cases) do
      local v, err = msgpack.decode(unhex(case[1]))
      assert.is_nil(v)
      assert.are.equal(case[2], err)
    end
    local v, err = msgpack.decode(string.rep("\x91", 10000) .. "\1")
    assert.is_nil(v)
    assert.truthy(err:find("nested more than 500 levels deep", 1, true))
  end)

  it("names the path of a value it cannot encode", function()
    local ok, err = pcall(msgpack.encode, { user = { tags = { "a", print } } })
    assert.is_false(ok)
    assert.truthy(err:find("mw.msgpack.encode: value.user.tags[2]: a function cannot be written as MessagePack", 1, true))
    ok, err = pcall(msgpack.encode, { "\255" })
    assert.truthy(err:find("value[1]: a string that is not valid UTF-8 cannot be a str; send bytes as mw.msgpack.bin(s)", 1, true))
  end)
end)

describe('codec = "msgpack"', function()
  local server, raw_server

  setup(function()
    server = assert(mw.listen("ws://127.0.0.1:0/", { codec = "msgpack" }))
    server:on_message(function(peer, msg) peer:send(msg) end)
    -- Answers anything with bytes that are not MessagePack.
    raw_server = assert(mw.listen("ws://127.0.0.1:0/"))
    raw_server:on_message(function(peer) peer:send("\xc1", "binary") end)
  end)

  teardown(function()
    server:close()
    raw_server:close()
  end)

  it("carries every kind over a real socket, in binary frames", function()
    local c = mw.connect(server:url(), { codec = "msgpack" })
    for i, v in ipairs(values) do
      assert(c:send(msgpack.array { i, v }))
      local back = assert(c:receive(5))
      assert.are.equal(i, back[1])
      assert.is_true(same(v, back[2]), ("value %d: %s"):format(i, tostring(v)))
    end
    c:close()
    local plain = mw.connect(server:url())
    assert(plain:send(msgpack.encode({ n = 1 }), "binary"))
    local bytes, kind = assert(plain:receive(5))
    assert.are.equal("binary", kind)
    assert.are.equal("81a16e01", hex(bytes))
    plain:close()
  end)

  it("keeps 64-bit integers, bytes and empty arrays", function()
    local c = mw.connect(server:url(), { codec = "msgpack" })
    assert(c:send({ id = math.mininteger, key = mw.msgpack.bin("\255"), list = mw.msgpack.array() }))
    local back = assert(c:receive(5))
    assert.are.equal(math.mininteger, back.id)
    assert.are.equal("\255", back.key.data)
    assert.are.equal(getmetatable(mw.msgpack.array()), getmetatable(back.list))
    c:close()
  end)

  it("reports a message that does not decode: receive returns nil and the error", function()
    local c = mw.connect(raw_server:url(), { codec = "msgpack" })
    assert(c:send({ hello = true }))
    local msg, err = c:receive(5)
    assert.is_nil(msg)
    assert.are.equal("decode: value: 0xc1 is not a MessagePack type (byte 0)", err)
    c:close()
  end)
end)
