-- moonwire.ocpp: OCPP-J (1.6 and 2.0.1) RPC over WebSocket, as a charge point
-- (ocpp.connect) and as a central system (ocpp.listen).
--
-- Design rules:
--  * One RPC endpoint (the `Endpoint` below) speaks the framing for both sides:
--    CALL [2, id, action, payload], CALLRESULT [3, id, payload],
--    CALLERROR [4, id, code, description, details]. The charge point and each
--    charge point connected to a central system are an endpoint over a socket.
--  * One CALL in flight per endpoint, as OCPP-J requires: further calls wait
--    their turn in order (at most `max_waiting`, then `nil, "too many calls
--    waiting ..."`). Every call has a deadline: `nil, "timeout after N s ..."`.
--  * A CALL whose answer is lost with the connection fails with a clear error
--    and is not sent again: the other side may have acted on it already.
--    Calls that had not been sent yet wait for the reconnect (until their deadline).
--  * Incoming CALLs go to the handler registered for their action, run in a
--    coroutine of their own (so a handler may itself call). No handler: a
--    CALLERROR (NotImplemented for an action the version does not define,
--    NotSupported for one it defines but the script does not handle).
--  * A message that cannot be an OCPP-J message (not JSON, not an array, no
--    message id) closes that connection with 1002 and says why in words.
--  * Misuse raises at the caller's line; failures from outside are nil, err.

local mw = require "moonwire"

local ocpp = {}

local CALL, CALLRESULT, CALLERROR = 2, 3, 4
local VERSIONS = { ["1.6"] = "ocpp1.6", ["2.0.1"] = "ocpp2.0.1" }
local VERSION_OF = { ["ocpp1.6"] = "1.6", ["ocpp2.0.1"] = "2.0.1" }

-- The actions each version defines (either direction), for the NotImplemented /
-- NotSupported choice on an unhandled CALL.
local ACTIONS = {
  ["1.6"] = [[Authorize BootNotification CancelReservation ChangeAvailability ChangeConfiguration
    ClearCache ClearChargingProfile DataTransfer DiagnosticsStatusNotification
    FirmwareStatusNotification GetCompositeSchedule GetConfiguration GetDiagnostics
    GetLocalListVersion Heartbeat MeterValues RemoteStartTransaction RemoteStopTransaction
    ReserveNow Reset SendLocalList SetChargingProfile StartTransaction StatusNotification
    StopTransaction TriggerMessage UnlockConnector UpdateFirmware
    CertificateSigned DeleteCertificate ExtendedTriggerMessage GetInstalledCertificateIds GetLog
    InstallCertificate LogStatusNotification SecurityEventNotification SignCertificate
    SignedFirmwareStatusNotification SignedUpdateFirmware]],
  ["2.0.1"] = [[Authorize BootNotification CancelReservation CertificateSigned ChangeAvailability
    ClearCache ClearChargingProfile ClearDisplayMessage ClearVariableMonitoring
    ClearedChargingLimit CostUpdated CustomerInformation DataTransfer DeleteCertificate
    FirmwareStatusNotification Get15118EVCertificate GetBaseReport GetCertificateStatus
    GetChargingProfiles GetCompositeSchedule GetDisplayMessages GetInstalledCertificateIds
    GetLocalListVersion GetLog GetMonitoringReport GetReport GetTransactionStatus GetVariables
    Heartbeat InstallCertificate LogStatusNotification MeterValues NotifyChargingLimit
    NotifyCustomerInformation NotifyDisplayMessages NotifyEVChargingNeeds
    NotifyEVChargingSchedule NotifyEvent NotifyMonitoringReport NotifyReport PublishFirmware
    PublishFirmwareStatusNotification ReportChargingProfiles RequestStartTransaction
    RequestStopTransaction ReservationStatusUpdate ReserveNow Reset SecurityEventNotification
    SendLocalList SetChargingProfile SetDisplayMessage SetMonitoringBase SetMonitoringLevel
    SetNetworkProfile SetVariableMonitoring SetVariables SignCertificate StatusNotification
    TransactionEvent TriggerMessage UnlockConnector UnpublishFirmware UpdateFirmware]],
}
for version, list in pairs(ACTIONS) do
  local set = {}
  for name in list:gmatch("%S+") do set[name] = true end
  ACTIONS[version] = set
end

-- The error codes that differ between the versions.
local FORMAT_VIOLATION = { ["1.6"] = "FormationViolation", ["2.0.1"] = "FormatViolation" }

local DEFAULT_TIMEOUT = 30
local DEFAULT_MAX_WAITING = 64

-- The prelude's helpers (misuse at the user's line, the check that the caller
-- may wait, waiters in a list woken by what they wait for), given by require.
local kit = select(3, ...)
local misuse, running, wait_listed, wake_listed = kit.misuse, kit.running, kit.wait_listed, kit.wake_listed

-- ---------------------------------------------------------------------------
-- Waiting: the calling coroutine waits in a future (mw.future); a callback (a
-- message, a timer, a close) sets it with the outcome.

-- The running coroutine waits in `list` until `wake` picks it, or until
-- `timeout` seconds passed (then nil, "timeout after N s: <what>").
local function wait_in(list, fname, timeout, what, entry)
  entry = entry or {}
  entry.future = mw.future(fname)
  return wait_listed(list, entry, timeout, timeout and ("timeout after %g s: %s"):format(timeout, what))
end

local wake = wake_listed

-- A fresh message id: 36 characters at most, unique per sender (a UUID v4).
local function message_id()
  local r = math.random
  return ("%08x-%04x-4%03x-%04x-%012x"):format(r(0, 0xffffffff), r(0, 0xffff), r(0, 0xfff),
    0x8000 | r(0, 0x3fff), r(0, 0xffffffffffff))
end

local function describe_value(v)
  if type(v) == "string" then return ("%q"):format(#v > 40 and v:sub(1, 40) .. "..." or v) end
  return type(v) == "table" and "a JSON " .. (#v > 0 and "array" or "object") or tostring(v)
end

-- ---------------------------------------------------------------------------
-- The RPC endpoint, one per socket (or per charge point, across its reconnects).

local Endpoint = {}
Endpoint.__index = Endpoint

-- `io` = { send = fn(text) -> ok, err, close = fn(code, reason), name = "..." };
-- `handlers` = a function(action) -> handler or nil.
local function new_endpoint(io, version, handlers, opts)
  return setmetatable({
    io = io, version = version, lookup = handlers,
    timeout = opts.timeout or DEFAULT_TIMEOUT, max_waiting = opts.max_waiting or DEFAULT_MAX_WAITING,
    open = false, inflight = nil, queue = {}, on_error = opts.on_error, observe = opts.observe, handling = 0,
  }, Endpoint)
end

function Endpoint:fail(err)
  if self.on_error then self.on_error(err) else mw.log.warn(self.io.name .. ": " .. err) end
end

-- A message that cannot be OCPP-J: the connection is closed, in words.
function Endpoint:violation(err)
  err = "ocpp: " .. err
  self:fail(err)
  self.io.close(1002, #err > 123 and err:sub(1, 120) .. "..." or err)
end

function Endpoint:send(frame)
  return self.io.send(mw.json.encode(mw.json.array(frame)))
end

function Endpoint:send_error(id, code, description, details)
  if type(details) ~= "table" then details = mw.json.object() end
  self:send({ CALLERROR, id, code, description or "", details })
end

-- The next waiting call goes out, if the socket is open and no call is in flight.
function Endpoint:pump()
  if not self.open or self.inflight then return end
  local call = table.remove(self.queue, 1)
  if not call then return end
  local ok, err = self:send({ CALL, call.id, call.action, call.payload })
  if not ok then
    call.finish(nil, ("%s: not sent: %s"):format(call.action, err))
    return self:pump()
  end
  self.inflight = call
end

function Endpoint:call(action, payload, timeout, fname)
  if type(action) ~= "string" then
    misuse(("bad argument #1 to '%s' (action name expected, got %s)"):format(fname, type(action)))
  end
  if payload == nil then payload = mw.json.object() end
  if type(payload) ~= "table" then
    misuse(("bad argument #2 to '%s' (payload table expected, got %s)"):format(fname, type(payload)))
  end
  if timeout ~= nil and (type(timeout) ~= "number" or timeout <= 0) then
    misuse(("bad argument #3 to '%s' (timeout: positive seconds expected, got %s)"):format(fname, tostring(timeout)))
  end
  -- Encoding errors (a function in the payload) are the caller's, at once.
  local ok, err = pcall(mw.json.encode, payload)
  if not ok then misuse(fname .. ": payload: " .. (tostring(err):gsub("^.-mw%.json%.encode: ", ""))) end
  running(fname)
  if self.closed_for_good then return nil, action .. ": " .. self.closed_for_good end
  if #self.queue >= self.max_waiting then
    return nil, ("%s: too many calls waiting (%d; one CALL at a time is in flight)"):format(action, self.max_waiting)
  end
  timeout = timeout or self.timeout
  -- The call's own timer ends it (its deadline counts while it waits its turn);
  -- one that fails before the caller waits (a send refused at once) is kept in
  -- the future for it.
  local result = mw.future(fname)
  local call = { id = message_id(), action = action, payload = payload }
  local timer
  function call.finish(...)
    if timer then timer:cancel() end
    result:set(...)
  end
  timer = mw.after(timeout, function()
    if result:is_set() then return end
    local sent = self.inflight == call
    if sent then self.inflight = nil else
      for i, c in ipairs(self.queue) do if c == call then table.remove(self.queue, i) break end end
    end
    call.finish(nil, ("timeout after %g s: %s %s"):format(timeout, action,
      sent and "was not answered" or "could not be sent (no connection)"))
    if sent then self:pump() end
  end)
  if self.opening then
    -- Made by an on_open handler: ahead of the calls that waited for the connection.
    self.opening = self.opening + 1
    table.insert(self.queue, self.opening, call)
  else
    self.queue[#self.queue + 1] = call
  end
  self:pump()
  return result:wait()
end

-- The socket opened (again): waiting calls go out.
function Endpoint:opened()
  self.open = true
  self.generation = (self.generation or 0) + 1
  self:pump()
end

-- The socket closed: the call in flight fails, as its answer can no longer
-- come; with `final`, so do the waiting ones.
function Endpoint:closed(why, final)
  self.open = false
  local call = self.inflight
  self.inflight = nil
  if call then
    call.finish(nil, ("%s: connection closed before the answer (%s); not sent again, as the other side may have acted on it")
      :format(call.action, why))
  end
  if final then
    self.closed_for_good = why
    local waiting = self.queue
    self.queue = {}
    for _, c in ipairs(waiting) do c.finish(nil, ("%s: not sent: %s"):format(c.action, why)) end
  end
end

-- An incoming CALL: the handler's answer, in a coroutine of its own.
function Endpoint:handle_call(id, action, payload, context)
  local version = self.version
  if type(action) ~= "string" then
    return self:send_error(id, FORMAT_VIOLATION[version], "field 3 (action) must be a string, got " .. describe_value(action))
  end
  if type(payload) ~= "table" or (#payload > 0) then
    return self:send_error(id, FORMAT_VIOLATION[version], action .. ": field 4 (payload) must be a JSON object, got " .. describe_value(payload))
  end
  if self.observe then self.observe(action, payload) end
  local handler = self.lookup(action)
  if not handler then
    if ACTIONS[version][action] then
      return self:send_error(id, "NotSupported", action .. " is not supported by this " .. context.role)
    end
    return self:send_error(id, "NotImplemented", ("%s is not an OCPP %s action"):format(action, version))
  end
  -- The other side should send one CALL at a time; one that floods gets an
  -- error for what exceeds max_waiting handlers at work.
  if self.handling >= self.max_waiting then
    return self:send_error(id, "GenericError", ("%s: %d CALLs are being handled already"):format(action, self.handling))
  end
  self.handling = self.handling + 1
  local generation = self.generation
  mw.spawn(function()
    local ok, result, code, description, details = pcall(handler, payload, context.target)
    self.handling = self.handling - 1
    -- The answer belongs to the connection the CALL came on.
    local current = self.open and self.generation == generation
    if not ok then
      if current then self:send_error(id, "InternalError", action .. ": the handler failed") end
      error(result, 0)
    end
    if not current then return end
    if result == nil then
      if type(code) ~= "string" then
        self:send_error(id, "InternalError", action .. ": the handler returned nothing")
        error(action .. " handler: return a payload table, or nil, error code, description", 0)
      end
      return self:send_error(id, code, description, details)
    end
    if type(result) ~= "table" then
      self:send_error(id, "InternalError", action .. ": the handler returned a " .. type(result))
      error(action .. " handler: a payload table expected, got " .. type(result), 0)
    end
    local sent, err = pcall(self.send, self, { CALLRESULT, id, result })
    if not sent then
      self:send_error(id, "InternalError", action .. ": the answer could not be written as JSON")
      error(action .. " handler: " .. tostring(err), 0)
    end
  end)
end

-- One WebSocket message from the other side.
function Endpoint:receive(text, context)
  local msg, err = mw.json.decode(text)
  if msg == nil then return self:violation("malformed message: not JSON: " .. err) end
  if type(msg) ~= "table" or #msg == 0 then
    return self:violation("malformed message: a JSON array [type, id, ...] expected, got " .. describe_value(msg))
  end
  local kind, id = msg[1], msg[2]
  if type(id) ~= "string" then
    return self:violation(("malformed message: field 2 (message id) must be a string, got %s"):format(describe_value(id)))
  end
  if kind == CALL then
    return self:handle_call(id, msg[3], msg[4], context)
  elseif kind == CALLRESULT or kind == CALLERROR then
    local call = self.inflight
    if not call or call.id ~= id then
      mw.log.warn(("%s: an answer to no call in flight (message id %s), ignored (a late answer to a call that timed out?)")
        :format(self.io.name, id))
      return
    end
    self.inflight = nil
    if kind == CALLRESULT then
      local payload = msg[3]
      if type(payload) ~= "table" or #payload > 0 then
        call.finish(nil, ("%s: malformed CALLRESULT: field 3 (payload) must be a JSON object, got %s")
          :format(call.action, describe_value(payload)))
      else
        call.finish(payload)
      end
    else
      local code, description, details = msg[3], msg[4], msg[5]
      code = type(code) == "string" and code or "GenericError"
      description = type(description) == "string" and description or ""
      local words = ("%s: CALLERROR %s%s"):format(call.action, code, description ~= "" and (": " .. description) or "")
      if type(details) == "table" and next(details) ~= nil then
        words = words .. " " .. mw.json.encode(details)
      end
      call.finish(nil, words, { code = code, description = description, details = details })
    end
    return self:pump()
  elseif math.type(kind) == "integer" and self.version == "2.0.1" then
    return self:send_error(id, "MessageTypeNotSupported", ("message type %d is not a CALL (2), CALLRESULT (3) or CALLERROR (4)"):format(kind))
  end
  return self:violation(("malformed message: field 1 (message type) must be 2, 3 or 4, got %s"):format(describe_value(kind)))
end

-- ---------------------------------------------------------------------------
-- Options

local function check_versions(opts, fname)
  local given = opts.versions or opts.version or "1.6"
  if type(given) == "string" then given = { given } end
  if type(given) ~= "table" or #given == 0 then
    misuse(("bad argument #2 to '%s' (opts.version: \"1.6\" or \"2.0.1\" expected)"):format(fname))
  end
  local protocols = {}
  for i, v in ipairs(given) do
    if not VERSIONS[v] then
      misuse(("bad argument #2 to '%s' (opts.version%s: \"1.6\" or \"2.0.1\" expected, got %s)")
        :format(fname, opts.versions and ("s[" .. i .. "]") or "", describe_value(v)))
    end
    protocols[i] = VERSIONS[v]
  end
  return protocols
end

-- Splits `opts` into the module's own keys and the rest, passed on to mw.connect / mw.listen.
local function split_options(opts, own, fname)
  if opts ~= nil and type(opts) ~= "table" then
    misuse(("bad argument #2 to '%s' (table expected, got %s)"):format(fname, type(opts)))
  end
  local mine, rest = {}, {}
  for k, v in pairs(opts or {}) do
    if own[k] then mine[k] = v elseif k == "protocols" or k == "codec" then
      misuse(("bad argument #2 to '%s' (opts.%s: set by the module; use opts.version)"):format(fname, k))
    else rest[k] = v end
  end
  if mine.timeout ~= nil and (type(mine.timeout) ~= "number" or mine.timeout <= 0) then
    misuse(("bad argument #2 to '%s' (opts.timeout: positive seconds expected)"):format(fname))
  end
  if mine.max_waiting ~= nil and (math.type(mine.max_waiting) ~= "integer" or mine.max_waiting < 1) then
    misuse(("bad argument #2 to '%s' (opts.max_waiting: a positive integer expected)"):format(fname))
  end
  return mine, rest
end

local function check_action(fname, action)
  if type(action) ~= "string" then
    misuse(("bad argument #1 to '%s' (action name expected, got %s)"):format(fname, type(action)))
  end
end

local function check_handler(fname, action, fn)
  check_action(fname, action)
  if type(fn) ~= "function" and fn ~= nil then
    misuse(("bad argument #2 to '%s' (function expected, got %s)"):format(fname, type(fn)))
  end
end

-- ---------------------------------------------------------------------------
-- The charge point: ocpp.connect(url, opts)

local ChargePoint = {}
ChargePoint.__index = ChargePoint

local CP_OPTIONS = { version = true, versions = true, id = true, timeout = true, max_waiting = true, password = true }

function ocpp.connect(url, opts)
  if type(url) ~= "string" then
    misuse(("bad argument #1 to 'ocpp.connect' (string expected, got %s)"):format(type(url)))
  end
  local mine, rest = split_options(opts, CP_OPTIONS, "ocpp.connect")
  local protocols = check_versions(mine, "ocpp.connect")
  if mine.id ~= nil then
    if type(mine.id) ~= "string" or mine.id == "" then
      misuse("bad argument #2 to 'ocpp.connect' (opts.id: a charge point id string expected)")
    end
    -- %-encoded in the path: an id may hold any character (the central system decodes it).
    url = url:gsub("/*$", "") .. "/" .. kit.url_escape(mine.id, ":")
  end
  local id = mine.id or url:match("([^/]+)/*$")
  if mine.password ~= nil then
    -- Security profile 1: HTTP Basic authentication with the charge point id as user.
    rest.headers = rest.headers or {}
    rest.headers.Authorization = "Basic " .. mw.base64(id .. ":" .. tostring(mine.password))
  end
  rest.protocols = protocols
  local c = mw.connect(url, rest)
  local cp = setmetatable({ id = id, connection = c, handlers = {}, on_open_handlers = {},
                            on_close_handlers = {}, on_error_handlers = {}, open_waiters = {}, expecting = {} }, ChargePoint)
  local context = { role = "charge point", target = cp }
  local io = {
    send = function(text) return c:send(text, "text") end,
    close = function(code, reason) c:close(code, reason) end,
    name = "ocpp charge point " .. id,
  }
  cp.rpc = new_endpoint(io, nil, function(action) return cp.handlers[action] end, {
    timeout = mine.timeout, max_waiting = mine.max_waiting,
    on_error = function(err) cp:emit_error(err) end,
    observe = function(action, payload)
      wake(cp.expecting, function(e) return e.action == action end, payload)
    end,
  })
  c:on_open(function(_, info)
    local version = VERSION_OF[info.protocol or ""]
    if not version then
      cp:emit_error(("ocpp: the central system agreed on no OCPP subprotocol (offered %s, got %s)")
        :format(table.concat(protocols, ", "), info.protocol or "none"))
      c:close(1002, "no OCPP subprotocol")
      return
    end
    cp.version, cp.rpc.version = version, version
    local event = { reconnects = info.reconnects, version = version }
    -- The handlers' calls (BootNotification) go before the calls that waited.
    cp.rpc.opening = 0
    for _, handler in ipairs(cp.on_open_handlers) do mw.spawn(handler, cp, event) end
    cp.rpc.opening = nil
    cp.rpc:opened()
    wake(cp.open_waiters, nil, true)
  end)
  c:on_message(function(_, text) cp.rpc:receive(text, context) end)
  c:on_error(function(_, err) cp.last_error = err cp:emit_error(err) end)
  c:on_close(function(_, code, reason, info)
    local why = ("closed with %d%s"):format(code, (reason or "") ~= "" and (" " .. reason) or "")
    cp.rpc:closed(why, not info.will_reconnect)
    for _, handler in ipairs(cp.on_close_handlers) do handler(cp, code, reason, info) end
    if not info.will_reconnect then
      wake(cp.open_waiters, nil, nil, cp.last_error or why)
      wake(cp.expecting, nil, nil, "the connection to the central system " .. why)
    end
  end)
  return cp
end

function ChargePoint:emit_error(err)
  if self.on_error_handlers[1] then
    for _, handler in ipairs(self.on_error_handlers) do handler(self, err) end
  else
    mw.log.warn("ocpp charge point " .. self.id .. ": " .. err)
  end
end

-- cp:call(action, payload [, timeout]) -> result | nil, err [, { code, description, details }]
function ChargePoint:call(action, payload, timeout)
  return self.rpc:call(action, payload, timeout, "cp:call")
end

-- cp:on(action, fn(payload, cp) -> result | nil, code, description [, details])
function ChargePoint:on(action, fn)
  check_handler("cp:on", action, fn)
  self.handlers[action] = fn
  return self
end

kit.define_handlers(ChargePoint, "cp", { "open", "close", "error" })

-- cp:wait_open([timeout]) -> true | nil, err
function ChargePoint:wait_open(timeout)
  if self.rpc.open then return true end
  if self.rpc.closed_for_good then return nil, self.last_error or self.rpc.closed_for_good end
  return wait_in(self.open_waiters, "cp:wait_open", timeout,
    "not connected to the central system (" .. (self.last_error or "no answer") .. ")")
end

-- cp:expect(action [, timeout]) -> payload | nil, err: waits for the central
-- system's next CALL of `action` (its handler, if any, still answers it).
function ChargePoint:expect(action, timeout)
  check_action("cp:expect", action)
  return wait_in(self.expecting, "cp:expect", timeout, "the central system did not call " .. action, { action = action })
end

function ChargePoint:close(code, reason)
  return self.connection:close(code, reason)
end

-- ---------------------------------------------------------------------------
-- The central system: ocpp.listen(url, opts)

local CentralSystem = {}
CentralSystem.__index = CentralSystem
local Peer = {}
Peer.__index = Peer

local CS_OPTIONS = { version = true, versions = true, timeout = true, max_waiting = true }

-- The charge point id: the last segment of the request path, %-decoded.
local function id_from_path(path)
  local last = (path or ""):gsub("%?.*$", ""):match("([^/]+)/*$") or ""
  return kit.url_unescape(last)
end

function ocpp.listen(url, opts)
  if type(url) ~= "string" then
    misuse(("bad argument #1 to 'ocpp.listen' (string expected, got %s)"):format(type(url)))
  end
  local mine, rest = split_options(opts, CS_OPTIONS, "ocpp.listen")
  if mine.version == nil and mine.versions == nil then mine.versions = { "2.0.1", "1.6" } end
  local protocols = check_versions(mine, "ocpp.listen")
  rest.protocols = protocols
  -- Charge points connect to PATH/<id>: the server takes every path, and the
  -- central system those under its own.
  local base, path = url:match("^(%a+://[^/]+)(.*)$")
  if not base then misuse(("bad argument #1 to 'ocpp.listen' (a ws:// or wss:// URL expected, got %q)"):format(url)) end
  path = path:gsub("/+$", "")
  local s, err = mw.listen(base .. "/", rest)
  if not s then return nil, err end
  local cs = setmetatable({ server = s, path = path, handlers = {}, by_id = {}, by_peer = {}, on_connect_handlers = {},
                            on_close_handlers = {}, on_error_handlers = {}, id_waiters = {}, expecting = {} }, CentralSystem)
  s:on_connect(function(peer, request)
    local under = (request.path or ""):gsub("%?.*$", "")
    if path ~= "" and under:sub(1, #path + 1) ~= path .. "/" then
      cs:emit_error(nil, ("ocpp: a connection to %s, which is not under %s/ (closed)"):format(request.path, path))
      peer:close(1008, "not an OCPP path: connect to " .. path .. "/<charge point id>")
      return
    end
    local id = id_from_path(request.path)
    local version = VERSION_OF[request.protocol or ""]
    if not version then
      cs:emit_error(nil, ("ocpp: charge point %q agreed on no OCPP subprotocol (it offered %s; this central system speaks %s)")
        :format(id, request.headers["sec-websocket-protocol"] or "none", table.concat(protocols, ", ")))
      peer:close(1002, "no OCPP subprotocol")
      return
    end
    local cp = setmetatable({ id = id, version = version, peer = peer, cs = cs, handlers = {}, request = request }, Peer)
    local io = {
      send = function(text) return peer:send(text, "text") end,
      close = function(code, reason) peer:close(code, reason) end,
      name = "ocpp central system, charge point " .. id,
    }
    cp.rpc = new_endpoint(io, version, function(action) return cp.handlers[action] or cs.handlers[action] end, {
      timeout = mine.timeout, max_waiting = mine.max_waiting,
      on_error = function(e) cs:emit_error(cp, e) end,
      observe = function(action, payload)
        wake(cs.expecting, function(e) return e.action == action and (e.id == nil or e.id == cp.id) end, payload, cp)
      end,
    })
    cp.context = { role = "central system", target = cp }
    cs.by_peer[peer] = cp
    cs.by_id[id] = cp
    cp.rpc:opened()
    for _, handler in ipairs(cs.on_connect_handlers) do mw.spawn(handler, cp, request) end
    wake(cs.id_waiters, function(e) return e.id == id end, cp)
  end)
  s:on_message(function(peer, text)
    local cp = cs.by_peer[peer]
    if cp then cp.rpc:receive(text, cp.context) end
  end)
  s:on_close(function(peer, code, reason)
    local cp = cs.by_peer[peer]
    if not cp then return end
    cs.by_peer[peer] = nil
    if cs.by_id[cp.id] == cp then cs.by_id[cp.id] = nil end
    cp.rpc:closed(("charge point %s disconnected (%d%s)"):format(cp.id, code, (reason or "") ~= "" and (" " .. reason) or ""), true)
    for _, handler in ipairs(cs.on_close_handlers) do handler(cp, code, reason) end
  end)
  return cs
end

function CentralSystem:emit_error(cp, err)
  if self.on_error_handlers[1] then
    for _, handler in ipairs(self.on_error_handlers) do handler(cp, err) end
  else
    mw.log.warn("ocpp central system: " .. err)
  end
end

-- cs:on(action, fn(payload, cp) -> result | nil, code, description [, details]): for every charge point.
function CentralSystem:on(action, fn)
  check_handler("cs:on", action, fn)
  self.handlers[action] = fn
  return self
end

kit.define_handlers(CentralSystem, "cs", { "connect", "close", "error" })
-- The URL charge points connect to, with their id after it: ws://127.0.0.1:9000/ocpp/
function CentralSystem:url() return self.server:url():gsub("/$", "") .. self.path .. "/" end
function CentralSystem:close() return self.server:close() end

-- The connected charge point with this id, or nil.
function CentralSystem:charge_point(id) return self.by_id[id] end

-- cs:wait_charge_point(id [, timeout]) -> cp | nil, err: waits until it connects.
function CentralSystem:wait_charge_point(id, timeout)
  if type(id) ~= "string" then
    misuse(("bad argument #1 to 'cs:wait_charge_point' (string expected, got %s)"):format(type(id)))
  end
  if self.by_id[id] then return self.by_id[id] end
  return wait_in(self.id_waiters, "cs:wait_charge_point", timeout or DEFAULT_TIMEOUT,
    "charge point " .. id .. " did not connect", { id = id })
end

-- cs:expect(action [, id] [, timeout]) -> payload, cp | nil, err: waits for the
-- next CALL of `action` from any charge point (or the one named `id`); the
-- handler, if any, still answers it.
function CentralSystem:expect(action, id, timeout)
  check_action("cs:expect", action)
  if type(id) == "number" and timeout == nil then id, timeout = nil, id end
  return wait_in(self.expecting, "cs:expect", timeout, "no charge point called " .. action, { action = action, id = id })
end

function CentralSystem:charge_points()
  local list = {}
  for _, cp in pairs(self.by_peer) do list[#list + 1] = cp end
  table.sort(list, function(a, b) return a.id < b.id end)
  return list
end

function Peer:call(action, payload, timeout)
  return self.rpc:call(action, payload, timeout, "cp:call")
end

function Peer:on(action, fn)
  check_handler("cp:on", action, fn)
  self.handlers[action] = fn
  return self
end

function Peer:close(code, reason) return self.peer:close(code, reason) end

ocpp.versions = { "1.6", "2.0.1" }

return ocpp
