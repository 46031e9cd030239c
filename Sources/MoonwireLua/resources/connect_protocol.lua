-- `moonwire connect --protocol NAME URL`: a protocol module spoken by hand.
-- Started as the main chunk with the options as JSON (the protocol, the module,
-- the URL, connect's flags that apply) and the host functions in
-- `mw._interpreter_host` (read_line, show, write_error).
--
-- Design rules:
--  * One driver for every protocol: PROTOCOLS below declares, per module, how
--    to connect, how what arrives reads as one line, and its commands, each
--    with its argument list as text ("topic payload [qos] [retain]"): the
--    parsing of a typed line and /help are derived from that text.
--  * Commands run one at a time in this coroutine, the main chunk's: a line is
--    read only once the previous command has had its answer (a SUBACK, a
--    CALLRESULT), so a pipe's lines keep their order and nothing piles up.
--  * What comes in goes out as "message" (stdout: one decoded line each, "<"
--    at a terminal), what happens to the session as "event" (stderr), as with
--    plain connect; the Swift side prints them (colours, --jsonl, --timestamps).
--  * The end as connect's: Ctrl-D or a command closes at once; the end of a
--    pipe closes once the peer has been quiet for a second (or after --wait);
--    exit 0 after a close with 1000/1001, 1 after another or a failed connect.

local options = mw.json.decode((...))
local host = mw._interpreter_host
mw._interpreter_host = nil
local resume = host.resume
local json = mw.json

-- Output -------------------------------------------------------------------

local last_in = mw.now()
-- Set once the session closes: a module's "closed" report is then no news.
local ending = false

-- A packet or event of the protocol, decoded: kind names it for --jsonl.
local function incoming(kind, text)
  last_in = mw.now()
  host.show("message", kind, "in", text)
end
local function outgoing(kind, text) host.show("message", kind, "out", text) end
local function note(kind, text) host.show("event", kind, "local", text) end
-- The peer's answer to a command (a SUBACK, a RECEIPT): an event that came in.
local function answer(kind, text) host.show("event", kind, "in", text) end
local function complain(text) host.show("error", "error", "local", text) end

local function encode(value)
  local ok, text = pcall(json.encode, value)
  return ok and text or tostring(value)
end

-- Arguments ----------------------------------------------------------------

-- The next word of line from i: its text, where the one after starts, where
-- it started. A word is a run of non-spaces, a JSON string "..." or '...'.
local function next_word(line, i)
  local start = line:find("%S", i)
  if not start then return nil end
  local quote = line:sub(start, start)
  if quote == '"' then
    local j = start + 1
    while true do
      local k = line:find('["\\]', j)
      if not k then error("a string that does not end: " .. line:sub(start), 0) end
      if line:sub(k, k) == "\\" then
        j = k + 2
      else
        local text, err = json.decode(line:sub(start, k))
        if text == nil then error("bad string " .. line:sub(start, k) .. ": " .. tostring(err), 0) end
        return text, k + 1, start
      end
    end
  elseif quote == "'" then
    local k = line:find("'", start + 1, true)
    if not k then error("a string that does not end: " .. line:sub(start), 0) end
    return line:sub(start + 1, k - 1), k + 1, start
  end
  local stop = line:find("%s", start) or #line + 1
  return line:sub(start, stop - 1), stop, start
end

-- "topic payload [qos] [retain]" as a list of { name, optional, rest }; a
-- name ending in "..." takes the rest of the line.
local function parse_spec(spec)
  local list = {}
  for word in (spec or ""):gmatch("%S+") do
    local inner = word:match("^%[(.*)%]$")
    local name = inner or word
    local rest = name:match("^(.-)%.%.%.$")
    list[#list + 1] = { name = rest or name, optional = inner ~= nil, rest = rest ~= nil }
  end
  return list
end

-- The typed arguments by name, or raises what is wrong in words.
local function parse_args(name, command, text)
  local values, i = {}, 1
  for _, arg in ipairs(command.spec) do
    local word, after, start = next_word(text, i)
    if word == nil then
      if arg.optional then break end
      error(("%s needs %s: %s %s"):format(name, arg.name, name, command.args), 0)
    end
    if arg.rest then
      -- The rest of the line as typed, unless it is one quoted string.
      local _, after_rest = next_word(text, after)
      values[arg.name] = (after_rest == nil and text:sub(start, start):match("[\"']")) and word or text:sub(start):gsub("%s+$", "")
      return values
    end
    values[arg.name] = word
    i = after
  end
  if next_word(text, i) ~= nil then
    error(("%s: too many arguments (quote one with spaces: \"a b\"): %s %s"):format(name, name, command.args), 0)
  end
  return values
end

-- JSON values separated by spaces ("hi there" 2 {"a": 1}) as a list; text
-- that is not JSON values is one string.
local function json_values(text)
  if text == nil or text == "" then return {} end
  local pieces, depth, quoted, escaped, start = {}, 0, false, false, nil
  for i = 1, #text do
    local ch = text:sub(i, i)
    if quoted then
      if escaped then escaped = false
      elseif ch == "\\" then escaped = true
      elseif ch == '"' then quoted = false end
    elseif ch:match("%s") and depth == 0 then
      if start then pieces[#pieces + 1] = text:sub(start, i - 1) start = nil end
    else
      start = start or i
      if ch == '"' then quoted = true
      elseif ch == "{" or ch == "[" then depth = depth + 1
      elseif ch == "}" or ch == "]" then depth = depth - 1 end
    end
  end
  if start then pieces[#pieces + 1] = text:sub(start) end
  local values = {}
  for i, piece in ipairs(pieces) do
    local value = json.decode(piece)
    if value == nil and piece ~= "null" then return { text } end
    values[i] = value
  end
  return values
end

local function qos_of(text)
  if text == nil then return 0 end
  local q = math.tointeger(tonumber(text))
  if q == nil or q < 0 or q > 2 then error("the QoS is 0, 1 or 2, not '" .. text .. "'", 0) end
  return q
end

-- Asks `fn(...)`, which answers value or nil, err; raises err.
local function must(value, err, ...)
  if value == nil or value == false then error(tostring(err), 0) end
  return value, err, ...
end

-- The protocols -------------------------------------------------------------
-- connect(url, opts, session) -> client, connection | raises why;
-- close(client); commands = { name = { args =, help =, run = fn(session, args) } };
-- bare(session, line): a line that names no command; subprotocols(opts, list).

local PROTOCOLS = {}

PROTOCOLS.mqtt = {
  connect = function(url, opts)
    local mqtt = require "moonwire.mqtt"
    local m = must(mqtt.connect(url, opts))
    m:on_message(function(_, msg)
      local flags = {}
      if msg.qos and msg.qos > 0 then flags[#flags + 1] = "qos " .. msg.qos end
      if msg.retain then flags[#flags + 1] = "retained" end
      incoming("publish", msg.topic .. " " .. msg.payload .. (#flags > 0 and ("  (" .. table.concat(flags, ", ") .. ")") or ""))
    end)
    m:on_error(function(_, err) complain(tostring(err)) end)
    answer("connack", ("CONNACK: session present %s, client id %s"):format(tostring(m.session_present), tostring(m.client_id)))
    return m, m:connection()
  end,
  close = function(m) m:disconnect() end,
  commands = {
    sub = { args = "filter [qos]", help = "subscribe; messages show as 'topic payload'",
      run = function(s, a)
        local qos = qos_of(a.qos)
        outgoing("subscribe", ("SUBSCRIBE %s qos %d"):format(a.filter, qos))
        answer("suback", ("SUBACK: %s granted QoS %d"):format(a.filter, must(s.client:subscribe(a.filter, qos))))
      end },
    unsub = { args = "filter", help = "unsubscribe",
      run = function(s, a)
        outgoing("unsubscribe", "UNSUBSCRIBE " .. a.filter)
        must(s.client:unsubscribe(a.filter))
        answer("unsuback", "UNSUBACK: " .. a.filter)
      end },
    pub = { args = "topic payload [qos] [retain]", help = "publish ('retain' to keep it); QoS 1 and 2 wait for the ack",
      run = function(s, a)
        local qos = qos_of(a.qos)
        if a.retain ~= nil and a.retain ~= "retain" then error("pub: the last word is 'retain' or nothing, not '" .. a.retain .. "'", 0) end
        outgoing("publish", ("PUBLISH %s %s%s%s"):format(a.topic, a.payload, qos > 0 and ("  (qos " .. qos .. ")") or "", a.retain and " retained" or ""))
        must(s.client:publish(a.topic, a.payload, { qos = qos, retain = a.retain ~= nil }))
        s.last_topic = a.topic
        if qos > 0 then answer(qos == 1 and "puback" or "pubcomp", (qos == 1 and "PUBACK: " or "PUBCOMP: ") .. a.topic) end
      end },
  },
  -- A bare line publishes to the topic of the last pub.
  bare = function(s, line)
    if not s.last_topic then error("a line publishes to the last pub's topic: pub a topic first (/help)", 0) end
    s:run("pub", ("%s %s"):format(s.last_topic, encode(line)))
  end,
}

PROTOCOLS.socketio = {
  connect = function(url, opts)
    local sio = require "moonwire.socketio"
    local socket = sio.connect(url, opts)
    socket:on_any(function(event, ...)
      local parts = { event }
      for i = 1, select("#", ...) do parts[#parts + 1] = encode((select(i, ...))) end
      incoming("event", table.concat(parts, " "))
    end)
    socket:on_disconnect(function(_, reason) note("disconnect", "disconnected: " .. tostring(reason)) end)
    socket:on_connect_error(function(_, err) complain("CONNECT_ERROR: " .. tostring(err)) end)
    must(socket:wait_connected(10))
    note("connect", ("joined namespace %s"):format(socket.nsp))
    return socket, socket.client.conn
  end,
  close = function(socket) socket:close() end,
  commands = {
    emit = { args = "event [args...]", help = "emit an event; args are JSON values (\"hi\" 2 {\"a\":1}), else one string",
      run = function(s, a)
        local values = json_values(a.args)
        outgoing("emit", a.event .. (a.args and (" " .. a.args) or ""))
        must(s.client:emit(a.event, table.unpack(values)))
      end },
    call = { args = "event [args...]", help = "emit with an ack and show the ack",
      run = function(s, a)
        outgoing("emit", a.event .. (a.args and (" " .. a.args) or "") .. "  (ack)")
        local answer = table.pack(s.client:call(a.event, table.unpack(json_values(a.args))))
        if answer[1] == nil then error(tostring(answer[2]), 0) end
        local parts = { "ack" }
        for i = 1, answer.n do parts[#parts + 1] = encode(answer[i]) end
        incoming("ack", table.concat(parts, " "))
      end },
  },
  -- A bare line is a "message" event, as socket.send sends it.
  bare = function(s, line) s:run("emit", "message " .. encode(line)) end,
}

local function next_id(s)
  s.ids = (s.ids or 0) + 1
  return s.ids
end

PROTOCOLS.graphql_ws = {
  subprotocols = function(opts, list)
    if #list > 1 then error("--subprotocol: graphql-ws speaks one, graphql-transport-ws or graphql-ws", 0) end
    opts.protocol = list[1]
  end,
  connect = function(url, opts)
    local gql = require "moonwire.graphql_ws"
    local client = gql.connect(url, opts)
    client:on_error(function(_, err) if not ending then complain(tostring(err)) end end)
    must(client:wait_ready(10))
    answer("connection_ack", "connection_ack (" .. client:protocol_name() .. ")")
    return client, client.conn
  end,
  close = function(client) client:close() end,
  commands = {
    query = { args = "document...", help = "a query or mutation; shows its data",
      run = function(s, a)
        outgoing("subscribe", a.document)
        local method = a.document:match("^%s*mutation") and "mutation" or "query"
        local data, err = s.client[method](s.client, a.document)
        if data == nil then error(tostring(err), 0) end
        incoming("next", encode(data))
      end },
    subscribe = { args = "document...", help = "a subscription; each result shows as '[N] {json}'",
      run = function(s, a)
        local n = next_id(s)
        outgoing("subscribe", ("[%d] %s"):format(n, a.document))
        s.subs = s.subs or {}
        s.subs[n] = must(s.client:subscribe(a.document, nil, {
          on_next = function(result) incoming("next", ("[%d] %s"):format(n, encode(result.data or result))) end,
          on_error = function(_, err) complain(("[%d] %s"):format(n, tostring(err))) end,
          on_complete = function() s.subs[n] = nil note("complete", ("[%d] complete"):format(n)) end,
        }))
      end },
    stop = { args = "n", help = "stop subscription N",
      run = function(s, a)
        local sub = (s.subs or {})[math.tointeger(tonumber(a.n)) or -1]
        if not sub then error("stop: no subscription " .. a.n .. " runs", 0) end
        outgoing("complete", "stop [" .. a.n .. "]")
        sub:stop()
      end },
  },
  -- A bare line is a document: a subscription subscribes, anything else is a query.
  bare = function(s, line)
    s:run(line:match("^%s*subscription") and "subscribe" or "query", line)
  end,
}

PROTOCOLS.stomp = {
  connect = function(url, opts)
    local stomp = require "moonwire.stomp"
    local client = stomp.connect(url, opts)
    client:on_error(function(_, err) complain(tostring(err)) end)
    local headers = must(client:wait_connected(10))
    answer("connected", ("CONNECTED: version %s, server %s"):format(tostring(headers.version), tostring(headers.server)))
    return client, client.connection
  end,
  close = function(client) client:disconnect() end,
  commands = {
    sub = { args = "destination [ack]", help = "subscribe (ack: auto, client, client-individual); messages show as 'destination body'",
      run = function(s, a)
        s.stomp_subs = s.stomp_subs or {}
        if s.stomp_subs[a.destination] then error("sub: already subscribed to " .. a.destination, 0) end
        local ack = a.ack or "auto"
        outgoing("subscribe", ("SUBSCRIBE %s ack %s"):format(a.destination, ack))
        s.stomp_subs[a.destination] = must(s.client:subscribe(a.destination, { ack = ack, receipt = true }, function(msg)
          incoming("message", a.destination .. " " .. msg.body)
          if ack ~= "auto" then msg:ack() end
        end))
        answer("receipt", "RECEIPT: subscribed to " .. a.destination)
      end },
    unsub = { args = "destination", help = "unsubscribe",
      run = function(s, a)
        local sub = (s.stomp_subs or {})[a.destination]
        if not sub then error("unsub: not subscribed to " .. a.destination, 0) end
        outgoing("unsubscribe", "UNSUBSCRIBE " .. a.destination)
        sub:unsubscribe()
        s.stomp_subs[a.destination] = nil
      end },
    send = { args = "destination body...", help = "SEND, waiting for its RECEIPT",
      run = function(s, a)
        outgoing("send", ("SEND %s %s"):format(a.destination, a.body))
        must(s.client:send(a.destination, a.body, { receipt = true }))
        answer("receipt", "RECEIPT: sent to " .. a.destination)
      end },
  },
}

PROTOCOLS.ocpp = {
  subprotocols = function(opts, list)
    local versions = {}
    for _, name in ipairs(list) do
      local version = name:match("^ocpp(.*)$")
      if not version then error("--subprotocol: OCPP's are ocpp1.6 and ocpp2.0.1, not " .. name, 0) end
      versions[#versions + 1] = version
    end
    opts.versions = versions
  end,
  connect = function(url, opts)
    local ocpp = require "moonwire.ocpp"
    local cp = ocpp.connect(url, opts)
    cp:on_error(function(_, err) complain(tostring(err)) end)
    -- The central system's CALLs, as they come (the module answers them).
    cp.connection:on_message(function(_, text)
      local frame = json.decode(text)
      if type(frame) == "table" and frame[1] == 2 then
        incoming("call", ("CALL %s %s"):format(tostring(frame[3]), encode(frame[4])))
      end
    end)
    must(cp:wait_open(10))
    note("open", ("charge point %s speaking OCPP %s"):format(cp.id, tostring(cp.version)))
    return cp, cp.connection
  end,
  close = function(cp) cp:close(1000) end,
  commands = {
    call = { args = "action [payload...]", help = "a CALL ({json}, default {}); shows its CALLRESULT",
      run = function(s, a)
        local payload = {}
        if a.payload then payload = must(json.decode(a.payload)) end
        outgoing("call", ("CALL %s %s"):format(a.action, encode(payload)))
        local result, err = s.client:call(a.action, payload)
        if result == nil then error(tostring(err), 0) end
        incoming("callresult", ("CALLRESULT %s %s"):format(a.action, encode(result)))
      end },
    answer = { args = "action payload...", help = "answer the central system's CALLs of action with this payload",
      run = function(s, a)
        local payload = must(json.decode(a.payload))
        s.client:on(a.action, function() return payload end)
        note("answer", ("answering %s with %s"):format(a.action, encode(payload)))
      end },
  },
  -- A bare line is a call: Action {json}.
  bare = function(s, line) s:run("call", line) end,
}
PROTOCOLS["graphql-ws"] = PROTOCOLS.graphql_ws

-- The session ----------------------------------------------------------------

local protocol = assert(PROTOCOLS[options.module], options.module)
for _, command in pairs(protocol.commands) do command.spec = parse_spec(command.args) end

local function help()
  local lines = {}
  local names = {}
  for name in pairs(protocol.commands) do names[#names + 1] = name end
  table.sort(names)
  local width = 0
  for _, name in ipairs(names) do width = math.max(width, #name + 1 + #protocol.commands[name].args) end
  for _, name in ipairs(names) do
    local command = protocol.commands[name]
    local usage = name .. " " .. command.args
    lines[#lines + 1] = usage .. (" "):rep(width - #usage + 3) .. command.help
  end
  local bare = {
    mqtt = "a line without a command publishes it to the last pub's topic",
    socketio = "a line without a command is emitted as a \"message\" event",
    graphql_ws = "a line without a command is a document: a subscription subscribes, else a query",
    stomp = "a line without a command shows this list",
    ocpp = "a line without a command is a call: Action {json}",
  }
  lines[#lines + 1] = "/stats, /help, /quit; " .. bare[options.module]
  lines[#lines + 1] = "Words with spaces go in quotes: \"a b\". Ctrl-D closes; Ctrl-C closes and exits 130."
  return table.concat(lines, "\n")
end

local session = {}
local closing = false

function session:run(name, text)
  local command = protocol.commands[name]
  command.run(self, parse_args(name, command, text))
end

-- One typed line: a command (with or without a leading /), or a bare line.
local function handle(line)
  if line:match("^%s*$") then return end
  local name, text = line:match("^%s*/?(%S+)%s*(.*)$")
  name = name:lower()
  local ok, err = pcall(function()
    if name == "help" or name == "?" then
      note("help", help())
    elseif name == "quit" or name == "close" or name == "exit" then
      closing = true
    elseif name == "stats" then
      local stats = session.client.stats and session.client:stats() or session.connection:stats()
      note("stats", encode(stats))
    elseif protocol.commands[name] and not line:match("^%s*//") then
      session:run(name, text)
    elseif line:match("^%s*/[^/]") then
      error(("unknown command /%s; /help lists them"):format(name), 0)
    elseif protocol.bare then
      protocol.bare(session, (line:gsub("^%s*/(/)", "%1")))
    else
      note("help", ("%s is not a command:\n%s"):format(name, help()))
    end
  end)
  if not ok then
    if err == host.exit_sentinel then error(err, 0) end
    complain(tostring(err))
  end
end

local function finish(code) mw.exit(code) end

-- Connect, with connect's flags where the module takes them.
-- Without --reconnect, as plain connect: a lost connection ends the session.
local opts = {}
if not options.reconnect then opts.reconnect = false end
if next(options.headers) then opts.headers = options.headers end
if next(options.tls) then opts.tls = options.tls end
if options.proxy then opts.proxy = options.proxy == "none" and false or options.proxy end
if options.compress then opts.compress = true end
for k, v in pairs(options.set) do opts[k] = v end
if #options.subprotocols > 0 then
  if not protocol.subprotocols then
    complain(("--subprotocol: %s chooses its own subprotocol"):format(options.protocol))
    finish(2)
  end
  local ok, err = pcall(protocol.subprotocols, opts, options.subprotocols)
  if not ok then complain(tostring(err)) finish(2) end
end

note("connecting", ("connecting to %s (%s)"):format(options.url, options.protocol))
local ok, client, connection = pcall(protocol.connect, options.url, opts, session)
if not ok then
  if client == host.exit_sentinel then error(client, 0) end
  complain(("cannot connect to %s: %s"):format(options.url, tostring(client)))
  finish(1)
end
session.client, session.connection = client, connection

connection:on_close(function(_, code, reason, info)
  if info and info.will_reconnect then
    note("close", ("connection lost: %d %s; reconnecting"):format(code, reason or ""))
    return
  end
  local normal = code == 1000 or code == 1001
  host.show(normal and "event" or "error", "close", "local", ("closed: %d%s"):format(code, (reason or "") ~= "" and (" " .. reason) or ""))
  finish(normal and 0 or 1)
end)

for _, line in ipairs(options.execute) do handle(line) end

local me = coroutine.running()
local function read_line()
  host.read_line(options.interactive and (options.protocol .. "> ") or "", function(line) resume(me, line) end)
  return coroutine.yield()
end

while not closing do
  local line = read_line()
  if line == nil then break end
  handle(line)
end

-- The end of a pipe: what answers still comes, then the close.
if not options.interactive and not closing then
  if options.wait then
    mw.sleep(math.min(options.wait, 1e9))
  else
    while mw.now() - last_in < 1 do mw.sleep(1 - (mw.now() - last_in)) end
  end
end
ending = true
local closed, err = pcall(protocol.close, client)
if not closed then
  if err == host.exit_sentinel then error(err, 0) end
  complain(tostring(err))
end
-- The close handler ends the session; a peer that never answers the close does not hold it.
mw.sleep(10)
finish(1)
