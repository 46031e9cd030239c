-- moonwire.graphql_ws: GraphQL over WebSocket, both subprotocols:
-- graphql-transport-ws (the graphql-ws library's protocol) and the legacy
-- graphql-ws of subscriptions-transport-ws, as a client (gql.connect) and as a
-- server for mocks (gql.listen).
--
-- Design rules:
--  * Written on the public mw API: one mw.connect per client with codec =
--    "json" (messages are decoded in native code), ready = "manual" (nothing
--    goes out before connection_ack), auto_reply answering the server's
--    {"type":"ping"} with {"type":"pong"} before the message reaches the
--    script, and on_reconnect declining to dial again after a refusal (44xx).
--  * The two protocols differ only in message names; one table (PROTOCOLS)
--    says which, and the rest of the code is shared.
--  * A subscription outlives a reconnect: after the next connection_ack it is
--    sent again with the same id, and on_reconnect says how many were.
--  * Outside failures come back as nil, err in words; misuse raises at the
--    caller's line. A malformed message closes that connection with an error
--    naming the protocol and the field.
--  * Bounded: results waiting for the iterator (opts.buffer per subscription),
--    operations at once (opts.max_operations).

local mw = require "moonwire"
local json = mw.json

local M = {}

-- The prelude's helpers, given by require: misuse raised at the caller's line, and
-- the check that the caller may wait (before a query goes out). Waits are futures
-- (mw.future): the event that completes one sets it.
local kit = select(3, ...)
local misuse, running, check_options, positive = kit.misuse, kit.running, kit.check_options, kit.positive

-- What each subprotocol calls its messages.
local PROTOCOLS = {
  ["graphql-transport-ws"] = { subscribe = "subscribe", next = "next", stop = "complete", terminate = nil },
  ["graphql-ws"] = { subscribe = "start", next = "data", stop = "stop", terminate = "connection_terminate" },
}
M.TRANSPORT_WS, M.LEGACY_WS = "graphql-transport-ws", "graphql-ws"

-- graphql-transport-ws close codes, in words.
local CLOSE_CODES = {
  [4400] = "bad request", [4401] = "unauthorized (no connection_ack yet)", [4403] = "forbidden (connection_init refused)",
  [4406] = "subprotocol not acceptable", [4408] = "connection_init timeout", [4409] = "subscriber for this id already exists",
  [4429] = "too many initialisation requests", [4500] = "internal server error",
}
M.close_codes = CLOSE_CODES

-- GraphQL errors (a list of { message, path }) as one line.
local function errors_text(errors)
  if type(errors) ~= "table" then return tostring(errors) end
  if errors.message then errors = { errors } end
  local parts = {}
  for _, e in ipairs(errors) do
    local text = type(e) == "table" and tostring(e.message) or tostring(e)
    if type(e) == "table" and type(e.path) == "table" then
      local path = {}
      for i, p in ipairs(e.path) do path[i] = tostring(p) end
      text = text .. " (at " .. table.concat(path, ".") .. ")"
    end
    parts[#parts + 1] = text
  end
  return table.concat(parts, "; ")
end
M.errors_text = errors_text

-- The operation's name: the one given, else that of the first named operation
-- in the document ("query Hello { ... }" -> "Hello").
local KEYWORDS = { query = true, mutation = true, subscription = true }
local function operation_name(query, given)
  if type(given) == "string" then return given end
  for keyword, name in query:gmatch("(%a+)%s+([_%a][_%w]*)") do
    if KEYWORDS[keyword] then return name end
  end
end

---------------------------------------------------------------------------
-- Client
---------------------------------------------------------------------------

local Client = {}
Client.__index = Client
local Subscription = {}
Subscription.__index = Subscription

local CONNECT_OPTIONS = {
  protocol = true, payload = true, ack_timeout = true, timeout = true, buffer = true, max_operations = true,
  headers = true, reconnect = true, connect_timeout = true, tls = true, proxy = true, record = true,
  max_message = true, queue = true, compress = true, heartbeat = true,
}
local PASSED = { "headers", "reconnect", "connect_timeout", "tls", "proxy", "record", "max_message", "queue", "compress", "heartbeat" }

-- gql.connect(url [, opts]) -> client, at once; the dial and connection_init follow.
function M.connect(url, opts)
  if type(url) ~= "string" then misuse("bad argument #1 to 'gql.connect' (string expected, got %s)", type(url)) end
  opts = check_options(opts, CONNECT_OPTIONS, "gql.connect", 2)
  local protocols
  if opts.protocol == nil then
    protocols = { M.TRANSPORT_WS, M.LEGACY_WS }
  elseif PROTOCOLS[opts.protocol] then
    protocols = { opts.protocol }
  else
    misuse('bad argument #2 to \'gql.connect\' (opts.protocol: "graphql-transport-ws" or "graphql-ws" expected, got %s)',
      type(opts.protocol) == "string" and ("%q"):format(opts.protocol) or type(opts.protocol))
  end
  if opts.payload ~= nil and type(opts.payload) ~= "table" and type(opts.payload) ~= "function" then
    misuse("bad argument #2 to 'gql.connect' (opts.payload: a table or a function returning one expected, got %s)", type(opts.payload))
  end
  local client = setmetatable({
    url = url, offered = protocols, payload = opts.payload, ops = {}, count = 0, next_id = 0,
    state = "connecting", generation = 0, reconnects = 0,
    ack_timeout = positive(opts, "ack_timeout", 10, "gql.connect"),
    timeout = positive(opts, "timeout", 10, "gql.connect"),
    buffer = positive(opts, "buffer", 1024, "gql.connect"),
    max_operations = positive(opts, "max_operations", 1024, "gql.connect"),
    on_reconnect_handlers = {}, on_error_handlers = {},
  }, Client)
  local copts = {
    codec = "json", ready = "manual", protocols = protocols,
    auto_reply = {
      match = function(m) return type(m) == "table" and m.type == "ping" end,
      reply = function() return { type = "pong" } end,
    },
  }
  for _, k in ipairs(PASSED) do copts[k] = opts[k] end
  local c = mw.connect(url, copts)
  client.conn = c
  c:on_open(function(_, info) client:_opened(info) end)
  c:on_message(function(_, msg) client:_message(msg) end)
  c:on_close(function(_, code, reason, info) client:_closed(code, reason, info) end)
  c:on_error(function(_, err, raw)
    if raw then
      client:_fail(("%s: a message that is not JSON (%s)"):format(client.protocol or "graphql-ws", err))
    else
      client.last_error = err
    end
  end)
  -- A refusal is final: dialing again would be refused again.
  c:on_reconnect(function()
    if client.refused then return false end
  end)
  return client
end

kit.define_handlers(Client, "client", { "reconnect", "error" })

-- Waits for connection_ack: true, or nil, err (refused, timeout, closed).
function Client:wait_ready(timeout)
  if self.state == "ready" then return true end
  if self.state == "closed" then return nil, self.final_error or "closed" end
  return kit.wait_next(self, "ready", "client:wait_ready", timeout)
end

function Client:_wake_ready(...) kit.fire_next(self, "ready", ...) end

function Client:_opened(info)
  local protocol = info.protocol
  if not protocol then
    -- A server that names no subprotocol: speak the one offered first.
    protocol = self.offered[1]
    mw.log.debug(("graphql-ws: %s chose no subprotocol; speaking %s"):format(self.url, protocol))
  end
  self.protocol, self.names = protocol, PROTOCOLS[protocol]
  self.reconnects = info.reconnects
  self.state = "initialising"
  local payload = self.payload
  if type(payload) == "function" then payload = payload(self) end
  self.conn:send_now({ type = "connection_init", payload = payload or json.object() })
  local generation = self.generation
  self.init_timer = mw.after(self.ack_timeout, function()
    if self.state == "initialising" and self.generation == generation then
      self:_fail(("%s: no connection_ack within %g s"):format(protocol, self.ack_timeout))
    end
  end)
end

-- A malformed message or a broken promise of the server: that connection closes.
function Client:_fail(err)
  self.protocol_error = err
  mw.log.warn(("%s (closing %s)"):format(err, self.url))
  self.conn:close(self.protocol == M.TRANSPORT_WS and 4400 or 1002, "protocol error")
end

function Client:_send_operation(op)
  op.generation = self.generation
  local payload = { query = op.query, variables = op.variables, operationName = op.operation_name }
  return self.conn:send({ id = op.id, type = self.names.subscribe, payload = payload })
end

function Client:_acked()
  if self.init_timer then self.init_timer:cancel() end
  self.generation = self.generation + 1
  self.state = "ready"
  local resubscribed = 0
  local ids = {}
  for id in pairs(self.ops) do ids[#ids + 1] = id end
  table.sort(ids, function(a, b) return tonumber(a) < tonumber(b) end)
  for _, id in ipairs(ids) do
    local op = self.ops[id]
    if op.sent_before then resubscribed = resubscribed + 1 end
    op.sent_before = true
    self:_send_operation(op)
  end
  self.conn:ready()
  if self.reconnects > 0 then
    local info = { reconnects = self.reconnects, resubscribed = resubscribed, protocol = self.protocol }
    for _, fn in ipairs(self.on_reconnect_handlers) do fn(self, info) end
  end
  self:_wake_ready(true)
end

-- The operation `op` ends: with `err` (a string) or completed (nil).
local function finish(op, err)
  local client = op.client
  if client.ops[op.id] == op then
    client.ops[op.id] = nil
    client.count = client.count - 1
  end
  if op.done then return end
  op.done, op.error = true, err
  if op.on_complete and not err then op.on_complete(op) end
  if op.on_error and err then op.on_error(op, err) end
  if op.waiting then op.waiting:set(nil, err or "complete") end
end

function Client:_result(op, payload)
  if type(payload) ~= "table" then
    return self:_fail(("%s: %s: the payload is not an object"):format(self.protocol, self.names.next))
  end
  if op.on_next then
    op.on_next(payload, op)
    return
  end
  local q = op.queue
  if q:push(payload) then
    op.dropped = q.dropped
    if op.dropped == 1 then
      mw.log.warn(("graphql-ws: subscription %s keeps %d results nobody takes; dropping the oldest (read them, or give on_next)")
        :format(op.id, self.buffer))
    end
  end
  local waiting = op.waiting
  if waiting and not waiting:is_set() then waiting:set(q:pop()) end
end

function Client:_message(msg)
  if type(msg) ~= "table" or type(msg.type) ~= "string" then
    return self:_fail(("%s: a message without a string 'type'"):format(self.protocol or "graphql-ws"))
  end
  local t = msg.type
  local names = self.names
  if t == "connection_ack" then
    if self.state ~= "initialising" then return self:_fail(self.protocol .. ": connection_ack twice") end
    return self:_acked()
  elseif t == "ka" or t == "pong" or t == "ping" then
    return
  elseif t == "connection_error" then
    self.refused = true
    local text = ("%s: the server refused connection_init: %s"):format(self.protocol, errors_text(msg.payload or "no reason"))
    self.protocol_error = text
    self.conn:close()
    return
  end
  local id = msg.id
  if t ~= names.next and t ~= "error" and t ~= "complete" then
    return self:_fail(("%s: unknown message type %q"):format(self.protocol, t))
  end
  if type(id) ~= "string" then
    return self:_fail(("%s: %s: the 'id' is missing or not a string"):format(self.protocol, t))
  end
  local op = self.ops[id]
  if not op then return end -- stopped meanwhile: late messages are expected
  if t == names.next then
    return self:_result(op, msg.payload)
  elseif t == "error" then
    return finish(op, "graphql: " .. errors_text(msg.payload))
  else
    return finish(op, nil)
  end
end

function Client:_closed(code, reason, info)
  if self.init_timer then self.init_timer:cancel() end
  local why
  if self.protocol_error then
    why = self.protocol_error
  elseif code and CLOSE_CODES[code] then
    why = ("%s: the server closed the connection with %d: %s"):format(self.protocol or "graphql-ws", code, CLOSE_CODES[code])
    if code >= 4400 and code < 4500 then self.refused = true end
  else
    why = "closed" .. (self.last_error and (": " .. self.last_error) or (" (" .. tostring(code) .. ")"))
  end
  if info.will_reconnect and not self.refused then
    self.state = "connecting"
    -- One-shot operations end; subscriptions wait for the next connection_ack.
    for _, op in pairs(self.ops) do
      if not op.subscription then finish(op, "disconnected: " .. why) end
    end
    return
  end
  self.state, self.final_error = "closed", why
  -- The handlers first, then what waits: a woken caller finds them done.
  for _, fn in ipairs(self.on_error_handlers) do fn(self, why) end
  for _, op in pairs(self.ops) do finish(op, why) end
  self:_wake_ready(nil, why)
end

-- A new operation (query, mutation or subscription).
function Client:_start(fname, query, variables, opts, subscription)
  if type(query) ~= "string" then misuse("bad argument #1 to '%s' (GraphQL document expected, got %s)", fname, type(query)) end
  if variables ~= nil and type(variables) ~= "table" then
    misuse("bad argument #2 to '%s' (variables: table expected, got %s)", fname, type(variables))
  end
  opts = check_options(opts, { operation_name = true, timeout = true, on_next = true, on_error = true, on_complete = true }, fname, 3)
  for _, k in ipairs { "on_next", "on_error", "on_complete" } do
    if opts[k] ~= nil and type(opts[k]) ~= "function" then
      misuse("bad argument #3 to '%s' (opts.%s: function expected, got %s)", fname, k, type(opts[k]))
    end
  end
  if self.state == "closed" then return nil, self.final_error or "closed" end
  if self.count >= self.max_operations then
    return nil, ("too many operations at once (%d, opts.max_operations)"):format(self.max_operations)
  end
  self.next_id = self.next_id + 1
  local op = setmetatable({ client = self, id = tostring(self.next_id), query = query, variables = variables,
    operation_name = opts.operation_name, subscription = subscription, queue = kit.inbox(self.buffer), dropped = 0,
    on_next = opts.on_next, on_error = opts.on_error, on_complete = opts.on_complete }, Subscription)
  self.ops[op.id] = op
  self.count = self.count + 1
  if self.state == "ready" then
    op.sent_before = true
    local ok, err = self:_send_operation(op)
    if not ok then
      finish(op, err)
      return nil, err
    end
  end
  return op
end

-- query / mutation: one result. Returns data, or nil, err [, result] (err
-- names the GraphQL errors in words; result is the whole payload).
local function one_shot(self, fname, query, variables, opts)
  running(fname)
  local timeout = opts and opts.timeout or self.timeout
  local op, err = self:_start(fname, query, variables, opts, false)
  if not op then return nil, err end
  op.waiting = mw.future(fname)
  local result
  result, err = op.waiting:wait(timeout)
  op.waiting = nil
  if result == nil then
    if err == "timeout" then op:stop() end
    if err ~= "complete" then return nil, err end
    result = op.queue:pop()
    if result == nil then return nil, "graphql: the operation completed without a result" end
  elseif not op.done then
    -- The result is in; the complete that follows finds no operation and is dropped.
    op.done = true
    self.ops[op.id] = nil
    self.count = self.count - 1
  end
  if result.errors ~= nil and result.errors ~= json.null then
    return nil, "graphql: " .. errors_text(result.errors), result
  end
  return result.data, nil, result
end

function Client:query(query, variables, opts) return one_shot(self, "client:query", query, variables, opts) end
function Client:mutation(query, variables, opts) return one_shot(self, "client:mutation", query, variables, opts) end

-- subscribe(query [, variables [, opts]]) -> subscription, or nil, err.
-- opts.on_next(result, sub) / on_error(sub, err) / on_complete(sub), or read
-- sub:results() / sub:next().
function Client:subscribe(query, variables, opts)
  return self:_start("client:subscribe", query, variables, opts, true)
end

-- The next result: result, or nil, "complete" / nil, err.
function Subscription:next(timeout)
  local kept = self.queue:pop()
  if kept ~= nil then return kept end
  if self.done then return nil, self.error or "complete" end
  self.waiting = mw.future("sub:next")
  local result, err = self.waiting:wait(timeout)
  self.waiting = nil
  return result, err
end

-- for result in sub:results([timeout]) do ... end: ends when the server
-- completes the subscription; an error (the server's, a timeout, a closed
-- connection) is raised at the loop.
function Subscription:results(timeout)
  return function()
    local result, err = self:next(timeout)
    if result ~= nil then return result end
    if err == "complete" then return nil end
    error(err, 2)
  end
end

-- Stops the subscription (complete / stop to the server).
function Subscription:stop()
  local client = self.client
  if client.ops[self.id] == self and client.state == "ready" and self.generation == client.generation then
    client.conn:send({ id = self.id, type = client.names.stop })
  end
  finish(self, nil)
end

function Client:protocol_name() return self.protocol end

-- Ends every operation and closes (connection_terminate first on graphql-ws).
function Client:close()
  if self.state == "ready" then
    for _, op in pairs(self.ops) do
      if op.subscription then self.conn:send({ id = op.id, type = self.names.stop }) end
    end
    if self.names.terminate then self.conn:send({ type = self.names.terminate }) end
  end
  self.conn:close()
end

---------------------------------------------------------------------------
-- Server (for mocks): resolvers by operation name
---------------------------------------------------------------------------

local Server = {}
Server.__index = Server

local LISTEN_OPTIONS = {
  operations = true, on_connect = true, protocols = true, ping_interval = true,
  tls = true, max_message = true, queue = true, handshake_timeout = true,
}

-- gql.listen(url, opts) -> server, or nil, err when it cannot bind.
-- opts.operations = { Name = fn(ctx) }: a query or mutation returns its
-- result ({ data = ..., errors = ... }, or just the data table); a subscription
-- calls ctx.emit(result) for each and returns when done (or raises: an error).
-- opts.on_connect(payload, peer) -> false, "why" refuses connection_init.
function M.listen(url, opts)
  if type(url) ~= "string" then misuse("bad argument #1 to 'gql.listen' (string expected, got %s)", type(url)) end
  opts = check_options(opts, LISTEN_OPTIONS, "gql.listen", 2)
  if type(opts.operations) ~= "table" then
    misuse("bad argument #2 to 'gql.listen' (opts.operations: a table of resolvers by operation name expected, got %s)", type(opts.operations))
  end
  local server = setmetatable({ operations = opts.operations, on_connect = opts.on_connect, peers = {},
    ping_interval = opts.ping_interval }, Server)
  local listener, err = mw.listen(url, {
    codec = "json", protocols = opts.protocols or { M.TRANSPORT_WS, M.LEGACY_WS },
    tls = opts.tls, max_message = opts.max_message, queue = opts.queue, handshake_timeout = opts.handshake_timeout,
  })
  if not listener then return nil, err end
  server.listener = listener
  listener:on_connect(function(peer, request)
    local protocol = request.protocol or M.TRANSPORT_WS
    server.peers[peer] = { protocol = protocol, names = PROTOCOLS[protocol], ops = {}, acked = false }
  end)
  listener:on_message(function(peer, msg) server:_message(peer, msg) end)
  listener:on_close(function(peer)
    local st = server.peers[peer]
    if st then for _, ctx in pairs(st.ops) do ctx.cancelled = true end end
    server.peers[peer] = nil
  end)
  if server.ping_interval then
    server.timer = mw.every(server.ping_interval, function()
      for peer, st in pairs(server.peers) do
        if st.acked then
          peer:send(st.protocol == M.TRANSPORT_WS and { type = "ping" } or { type = "ka" })
        end
      end
    end)
  end
  return server
end

function Server:url() return self.listener:url() end

function Server:close()
  if self.timer then self.timer:cancel() end
  self.listener:close()
end

local function server_fail(peer, st, err)
  mw.log.warn(("%s (closing peer %s)"):format(err, tostring(peer.id)))
  peer:close(st.protocol == M.TRANSPORT_WS and 4400 or 1002, err:sub(1, 120))
end

-- An operation's error: graphql-transport-ws carries a list of GraphQL errors,
-- the legacy graphql-ws one error object.
local function send_error(peer, st, id, message)
  local err = { message = message }
  peer:send({ id = id, type = "error", payload = st.protocol == M.TRANSPORT_WS and json.array({ err }) or err })
end

function Server:_run(peer, st, id, payload)
  local names = st.names
  if type(payload) ~= "table" or type(payload.query) ~= "string" then
    return server_fail(peer, st, ("%s: %s: the payload has no 'query' string"):format(st.protocol, names.subscribe))
  end
  if st.ops[id] then
    if st.protocol == M.TRANSPORT_WS then
      peer:close(4409, "Subscriber for " .. id .. " already exists")
      return
    end
    st.ops[id].cancelled = true
  end
  local name = payload.operationName
  if name == json.null then name = nil end
  name = operation_name(payload.query, name)
  local resolver = name and self.operations[name]
  if not resolver then
    send_error(peer, st, id, ("no resolver for the operation %s"):format(tostring(name)))
    return
  end
  local ctx = { id = id, query = payload.query, operation_name = name, peer = peer, payload = st.init_payload,
    variables = (payload.variables ~= json.null and payload.variables) or {} }
  function ctx.emit(result)
    if ctx.cancelled then return false end
    if type(result) ~= "table" then error("ctx.emit: a result table expected, got " .. type(result), 2) end
    if result.data == nil and result.errors == nil then result = { data = result } end
    return peer:send({ id = id, type = names.next, payload = result })
  end
  st.ops[id] = ctx
  mw.spawn(function()
    local ok, result = pcall(resolver, ctx)
    if ctx.cancelled then return end
    st.ops[id] = nil
    if not ok then
      send_error(peer, st, id, tostring(result))
      return
    end
    if result ~= nil then ctx.emit(result) end
    peer:send({ id = id, type = "complete" })
  end)
end

function Server:_message(peer, msg)
  local st = self.peers[peer]
  if not st then return end
  if type(msg) ~= "table" or type(msg.type) ~= "string" then
    return server_fail(peer, st, st.protocol .. ": a message without a string 'type'")
  end
  local t, names = msg.type, st.names
  if t == "connection_init" then
    if st.acked then
      if st.protocol == M.TRANSPORT_WS then peer:close(4429, "Too many initialisation requests") end
      return
    end
    local payload = msg.payload
    if payload == json.null then payload = nil end
    if self.on_connect then
      local ok, why = self.on_connect(payload or {}, peer)
      if ok == false then
        if st.protocol == M.TRANSPORT_WS then
          peer:close(4403, "Forbidden")
        else
          peer:send({ type = "connection_error", payload = { message = tostring(why or "refused") } })
          peer:close(1011)
        end
        return
      end
    end
    st.acked, st.init_payload = true, payload
    peer:send({ type = "connection_ack" })
    -- subscriptions-transport-ws servers send the first ka right after the ack.
    if st.protocol == M.LEGACY_WS and self.ping_interval then peer:send({ type = "ka" }) end
  elseif t == "ping" then
    peer:send({ type = "pong" })
  elseif t == "pong" then
    return
  elseif t == names.subscribe then
    if not st.acked then
      if st.protocol == M.TRANSPORT_WS then peer:close(4401, "Unauthorized") end
      return
    end
    if type(msg.id) ~= "string" then
      return server_fail(peer, st, ("%s: %s: the 'id' is missing or not a string"):format(st.protocol, t))
    end
    self:_run(peer, st, msg.id, msg.payload)
  elseif t == names.stop then
    local ctx = type(msg.id) == "string" and st.ops[msg.id]
    if ctx then
      ctx.cancelled = true
      st.ops[msg.id] = nil
      if st.protocol == M.LEGACY_WS then peer:send({ id = msg.id, type = "complete" }) end
    end
  elseif t == "connection_terminate" then
    peer:close()
  else
    return server_fail(peer, st, ("%s: unknown message type %q"):format(st.protocol, t))
  end
end

return M
