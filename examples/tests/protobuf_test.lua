-- protobuf_test.lua: mw.protobuf over real sockets, with the schema of
-- examples/chat.proto loaded at run time, and its answers to bad input.
--   moonwire test examples/tests
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
mw.protobuf.load(here .. "../chat.proto")
mw.protobuf.load("google/protobuf/struct.proto") -- a well-known type by its import name
local pb = mw.protobuf

-- The wire format by hand, for inputs no encoder would write.
local function varint(n)
  local out = {}
  repeat
    local b = n & 0x7F
    n = n >> 7
    out[#out + 1] = string.char(n ~= 0 and (b | 0x80) or b)
  until n == 0
  return table.concat(out)
end
local function field(number, wire_type, payload)
  local tag = varint((number << 3) | wire_type)
  if wire_type == 2 then return tag .. varint(#payload) .. payload end
  return tag .. payload
end

describe("mw.protobuf codec", function()
  local server, url
  local codec = pb.codec("chat.Envelope")

  setup(function()
    server = assert(mw.listen("ws://127.0.0.1:0/chat", { codec = codec }))
    server:on_message(function(peer, env)
      if env.login then
        peer:send({ id = env.id, welcome = { user = env.login.user, session = -1 } })
      elseif env.say then
        peer:send(env)
      end
    end)
    url = server:url()
  end)

  teardown(function() server:close() end)

  it("sends tables and receives tables, in binary frames", function()
    local c = mw.connect(url, { codec = codec })
    c:send({ id = 7, login = { user = "ann" } })
    local env, kind = assert(c:receive(2))
    assert.are.equal("binary", kind)
    assert.are.equal(7, env.id)
    assert.are.equal("ann", env.welcome.user)
    -- uint64 2^64-1 is the Lua integer with the same 64 bits
    assert.are.equal(-1, env.welcome.session)
    assert.is_nil(env.login)
    c:close()
  end)

  it("keeps 64-bit integers, strings, empty lists and maps exact", function()
    local c = mw.connect(url, { codec = codec })
    c:send({ id = math.maxinteger, say = { text = "héllo\0", tags = {} }, meta = {} })
    local env = assert(c:receive(2))
    assert.are.equal(math.maxinteger, env.id)
    assert.are.equal("héllo\0", env.say.text)
    -- absent repeated and map fields come as empty tables, marked as JSON would show them
    assert.are.same({}, env.say.tags)
    assert.are.equal("[]", mw.json.encode(env.say.tags))
    assert.are.equal("{}", mw.json.encode(env.meta))
    c:close()
  end)

  it("reports a message that does not decode, and receive returns nil, err", function()
    local raw_server = assert(mw.listen("ws://127.0.0.1:0/raw"))
    raw_server:on_message(function(peer) peer:send("\x08", "binary") end) -- a varint cut short
    local c = mw.connect(raw_server:url(), { codec = codec })
    local errors = {}
    c:on_error(function(_, err, raw) errors[#errors + 1] = { err, raw } end)
    c:send({ id = 1 })
    local msg, err = c:receive(2)
    assert.is_nil(msg)
    assert.are.equal("decode: chat.Envelope.id: truncated varint (at byte 1)", err)
    assert.are.same({ { err, "\x08" } }, errors)
    c:close()
    raw_server:close()
  end)

  it("names the field path of a value that does not fit", function()
    local ok, err = pcall(pb.encode, "chat.Envelope", { login = { user = 42 } })
    assert.is_false(ok)
    assert.matches('chat.Envelope.login.user: expected string, got integer 42$', err)
    ok, err = pcall(pb.encode, "chat.Envelope", { say = { tags = { "a", true } } })
    assert.is_false(ok)
    assert.matches('chat.Envelope.say.tags%[2%]: expected string, got boolean true$', err)
    ok, err = pcall(pb.encode, "chat.Envelope", { login = {}, say = {} })
    assert.is_false(ok)
    assert.matches("chat.Envelope: oneof body: both login and say are set$", err)
    ok, err = pcall(pb.encode, "chat.Envelope", { idd = 1 })
    assert.is_false(ok)
    assert.matches('chat.Envelope: no field named "idd" in chat.Envelope$', err)
    -- the misspelt key is named whichever order the table keeps its keys in
    for _, wrong in ipairs({ "a", "id2", "zzz", "usr" }) do
      local value = { login = { user = "ann", token = "t" }, id = 7, meta = { k = "v" } }
      value.login[wrong] = 1
      ok, err = pcall(pb.encode, "chat.Envelope", value)
      assert.is_false(ok)
      assert.matches('chat.Envelope.login: no field named "' .. wrong .. '" in chat.Login$', err)
    end
    -- through a connection's send: the error names the send and the field
    local c = mw.connect(url, { codec = codec })
    ok, err = pcall(c.send, c, { id = "x" })
    assert.is_false(ok)
    assert.matches('c:send: chat.Envelope.id: expected integer, got string "x"$', err)
    ok, err = pcall(c.send, c, "not a table")
    assert.is_false(ok)
    assert.matches('c:send: chat.Envelope: expected table, got string "not a table"$', err)
    c:close()
  end)

  it("keeps unknown fields through a server's decode and send", function()
    -- A Say with a field 99 chat.Envelope does not have: the server echoes the table.
    local sent = pb.encode("chat.Envelope", { say = { text = "hi", tags = { "a" } } }) .. field(99, 0, varint(300))
    local plain = mw.connect(url)
    plain:send(sent, "binary")
    local back, kind = assert(plain:receive(2))
    assert.are.equal("binary", kind)
    assert.are.equal(sent, back)
    plain:close()
  end)

  it("broadcasts tables to every peer, and each decodes them", function()
    local s = assert(mw.listen("ws://127.0.0.1:0/", { codec = codec }))
    s:on_message(function(peer, env) peer:send(env) end)
    local a, b = mw.connect(s:url(), { codec = codec }), mw.connect(s:url(), { codec = codec })
    -- An answer from each peer: both are the server's before the broadcast.
    for _, c in ipairs({ a, b }) do
      c:send({ id = 1 })
      assert.are.equal(1, assert(c:receive(2)).id)
    end
    assert.are.equal(2, s:broadcast({ id = 5, say = { text = "all" } }))
    for _, c in ipairs({ a, b }) do
      local env, kind = assert(c:receive(2))
      assert.are.equal("binary", kind)
      assert.are.equal("all", env.say.text)
      c:close()
    end
    s:close()
  end)

  it("keeps a connection's schema when the type is loaded again", function()
    local c = mw.connect(url, { codec = pb.codec("chat.Envelope") })
    pb.load(here .. "../chat.proto")
    collectgarbage()
    c:send({ id = 3, say = { text = "again" } })
    local env = assert(c:receive(2))
    assert.are.equal("again", env.say.text)
    c:close()
  end)

  it("matches raw bytes only with a string reply (the rest of a rule gets the table)", function()
    local ok, err = pcall(mw.connect, url, { codec = codec, auto_reply = { match = "x", reply = function() end } })
    assert.is_false(ok)
    assert.matches('with codec = mw.protobuf.codec%("chat.Envelope"%) a string match needs a string reply', err)
  end)

  it("chooses the payload's type by a field (the envelope form)", function()
    local frames = pb.codec("chat.Frame", { select = "type", payload = "payload",
      types = { login = "chat.Login", say = "chat.Say" } })
    local bytes = frames.encode({ type = "say", payload = { text = "hi", tags = { "x" } } })
    local say = pb.encode("chat.Say", { text = "hi", tags = { "x" } })
    assert.are.equal(pb.encode("chat.Frame", { type = "say", payload = say }), bytes)
    local frame = assert(frames.decode(bytes))
    assert.are.equal("hi", frame.payload.text)
    local msg, err = frames.decode(pb.encode("chat.Frame", { type = "shout", payload = "" }))
    assert.is_nil(msg)
    assert.are.equal("chat.Frame.type: no message type for type = shout", err)
  end)
end)

describe("mw.protobuf values", function()
  it("round-trips NaN, infinities and -0.0", function()
    for _, x in ipairs({ 0 / 0, 1 / 0, -1 / 0, -0.0, 5e-324 }) do
      local v = assert(pb.decode("google.protobuf.Value", pb.encode("google.protobuf.Value", { number_value = x })))
      assert.are.equal(string.pack("<d", x), string.pack("<d", v.number_value))
    end
  end)

  it("keeps unknown fields through decode and encode", function()
    -- Login with a field 9 its schema does not have
    local bytes = field(1, 2, "ann") .. field(9, 0, varint(300)) .. field(10, 2, "?")
    local login = assert(pb.decode("chat.Login", bytes))
    assert.are.same({ user = "ann", token = "" }, login)
    assert.are.equal(field(9, 0, varint(300)) .. field(10, 2, "?"), pb.unknown(login))
    assert.are.equal(bytes, pb.encode("chat.Login", login))
  end)

  it("checks the keys of a decoded table that got new ones, and keeps its unknown fields", function()
    local bytes = field(1, 2, "ann") .. field(9, 0, varint(300))
    local login = assert(pb.decode("chat.Login", bytes))
    login.usr = "bob" -- misspelt: a key the decoded table did not have
    local ok, err = pcall(pb.encode, "chat.Login", login)
    assert.is_false(ok)
    assert.matches('chat.Login: no field named "usr" in chat.Login$', err)
    login.usr = nil
    login.token = "t" -- a field it had: still encodes, unknown fields and all
    assert.are.equal(field(1, 2, "ann") .. field(2, 2, "t") .. field(9, 0, varint(300)), pb.encode("chat.Login", login))
    -- nested: a decoded message inside a decoded message
    local env = assert(pb.decode("chat.Envelope", pb.encode("chat.Envelope", { id = 3, login = { user = "ann" } })))
    env.login.tokn = "x"
    ok, err = pcall(pb.encode, "chat.Envelope", env)
    assert.is_false(ok)
    assert.matches('chat.Envelope.login: no field named "tokn" in chat.Login$', err)
    -- decoded as one type, encoded as another: its keys are checked against that one
    ok, err = pcall(pb.encode, "chat.Say", assert(pb.decode("chat.Login", field(1, 2, "ann"))))
    assert.is_false(ok)
    assert.matches('chat.Say: no field named "%a+" in chat.Say$', err)
    -- a nil key is Lua's own error, at this line
    ok, err = pcall(function() env[nil] = 1 end)
    assert.is_false(ok)
    assert.matches("protobuf_test.lua:%d+: table index is nil$", err)
  end)

  it("gives enum names, and numbers no name has as integers", function()
    local v = assert(pb.decode("google.protobuf.Value", field(1, 0, varint(0))))
    assert.are.equal("NULL_VALUE", v.null_value)
    v = assert(pb.decode("google.protobuf.Value", field(1, 0, varint(5))))
    assert.are.equal(5, v.null_value)
    assert.are.equal(field(1, 0, varint(5)), pb.encode("google.protobuf.Value", v))
  end)

  it("rejects invalid UTF-8 in a proto3 string, and keeps any bytes in bytes", function()
    local msg, err = pb.decode("chat.Login", field(1, 2, "\xff"))
    assert.is_nil(msg)
    assert.are.equal("chat.Login.user: invalid UTF-8 in a string (byte 1 of 1) (at byte 1)", err)
    local frame = assert(pb.decode("chat.Frame", field(2, 2, "\xff\0")))
    assert.are.equal("\xff\0", frame.payload)
  end)
end)

describe("mw.protobuf on bad input", function()
  local function decode_error(tname, bytes)
    local msg, err = pb.decode(tname, bytes)
    assert.is_nil(msg)
    return err
  end

  it("a truncated varint", function()
    assert.are.equal("chat.Envelope.id: truncated varint (at byte 1)", decode_error("chat.Envelope", "\x08\xff\xff"))
  end)

  it("a length past the end", function()
    assert.are.equal("chat.Envelope.login: length 5 past the end of the message (2 bytes left) (at byte 1)",
      decode_error("chat.Envelope", "\x1a\x05ab"))
  end)

  it("a 2 GiB declared length: an error, nothing allocated for it", function()
    local before = collectgarbage("count")
    local err = decode_error("chat.Envelope", "\x32" .. varint(1 << 31) .. "abc")
    assert.are.equal(
      "chat.Envelope.meta: length 2147483648 past the end of the message (3 bytes left) (at byte 1)", err)
    assert.is_true(collectgarbage("count") - before < 64)
  end)

  it("a wrong wire type", function()
    assert.are.equal("chat.Envelope.id: wire type 2 (length-delimited) where uint64 expects 0 (varint) (at byte 0)",
      decode_error("chat.Envelope", field(1, 2, "x")))
  end)

  it("10 000 levels of nesting: stopped at 100", function()
    -- google.protobuf.Value { list_value = ListValue { values = { Value { ... } } } }
    local bytes = ""
    for _ = 1, 5000 do bytes = field(6, 2, field(1, 2, bytes)) end
    local err = decode_error("google.protobuf.Value", bytes)
    assert.matches(
      "^google.protobuf.Value.list_value.values.list_value.values.*: messages nested deeper than 100 levels", err)
  end)

  it("an invalid tag and wire type", function()
    assert.are.equal("chat.Envelope: invalid tag 0 (at byte 0)", decode_error("chat.Envelope", "\x00"))
    assert.are.equal("chat.Envelope: invalid wire type 7 of field 15 (at byte 1)",
      decode_error("chat.Envelope", "\x7f"))
  end)
end)
