---@meta moonwire
-- The moonwire Lua API for editors (lua-language-server): every function of `mw` and
-- every method of the objects it returns, with its arguments and results. This file
-- is also the list `moonwire check` and the luacheck std of `moonwire init` are made
-- from, and a test holds it to what the program really defines, both ways.
-- Reference: docs/scripting.md.

---@alias mw.Kind "text"|"binary"
---@alias mw.Match string|table|fun(msg: any, kind: mw.Kind): any

-- @options: mw.ConnectOptions, mw.ListenOptions and the fields of their table options
-- (mw.Tls, mw.Heartbeat, mw.Reconnect, mw.Queue) go here, made from the options' declarations.

---@class mw.AutoReplyRule
---@field match string|fun(msg: any, kind: mw.Kind): any
---@field reply string|fun(msg: any, kind: mw.Kind): any

---@class mw.Codec
---@field encode? fun(value: any): string
---@field decode? fun(bytes: string, kind: mw.Kind): any, string?

---@class mw.OpenInfo
---@field reconnects integer opens of this connection before this one
---@field headers table<string, string> the 101 response's headers, names in lower case
---@field protocol? string the subprotocol the server chose

---@class mw.CloseInfo
---@field by "local"|"peer"|"network" who ended it
---@field clean boolean close frames went both ways
---@field will_reconnect boolean another dial follows

---@class mw.WaitOptions
---@field timeout? number seconds
---@field kind? mw.Kind only messages of this kind

---@class mw.Stats
---@field sent integer
---@field received integer
---@field bytes_sent integer
---@field bytes_received integer
---@field reconnects integer
---@field queued integer
---@field buffered integer
---@field dropped integer
---@field auto_replies integer
---@field last_rtt? number
---@field connect? table

---@class mw.Limits
---@field memory? integer bytes, 0 for none
---@field callback_warning? number seconds
---@field callback_timeout? number seconds
---@field send_budget? integer bytes

---@class mw.Request
---@field path string
---@field headers table<string, string>
---@field protocol? string
---@field remote_address string

---@class mw
---@field args string[] the script's arguments
---@field worker integer this copy's number under run --workers (1 to N)
---@field workers integer N
---@field shard { index: integer, count: integer } this process's part under run --shard I/N
---@field _VERSION string moonwire's version
mw = {}

---A value set once that coroutines wait for; `name` is what a wait is called in
---errors and test timeouts (default "f:wait").
---@param name? string
---@return mw.Future
function mw.future(name) end

---Calls `fn(timer)` once after `seconds` (0: on the next loop turn).
---@param seconds number
---@param fn fun(timer: mw.Timer)
---@return mw.Timer
function mw.after(seconds, fn) end

---Calls `fn(timer)` every `seconds` until cancelled.
---@param seconds number
---@param fn fun(timer: mw.Timer)
---@return mw.Timer
function mw.every(seconds, fn) end

---Runs `fn(...)` as a coroutine now, until it first waits.
---@param fn function
---@param ... any
---@return thread
function mw.spawn(fn, ...) end

---Waits without blocking the loop; only inside a coroutine.
---@param seconds number
function mw.sleep(seconds) end

---Monotonic seconds.
---@return number
function mw.now() end

---True when the clock is virtual (test --virtual-time, run --virtual-time).
---@return boolean
function mw.virtual_time() end

---Ends the script at once with `code` (0 to 255; true/false mean 0/1).
---@param code? integer|boolean
function mw.exit(code) end

---Sets (with `opts`) and returns the limits in force.
---@param opts? mw.Limits
---@return mw.Limits
function mw.limits(opts) end

---Opens a connection (ws://, wss://, tcp://, tls://); returns at once, the dial starts on the next loop turn.
---@param url string
---@param opts? mw.ConnectOptions
---@return mw.Connection
function mw.connect(url, opts) end

---Starts a server (ws://HOST:PORT/PATH or tcp://HOST:PORT; port 0 picks a free one).
---@param url string
---@param opts? mw.ListenOptions
---@return mw.Server|nil server
---@return string? err
function mw.listen(url, opts) end

---A readable rendering of any value.
---@param value any
---@param opts? { depth?: integer }
---@return string
function mw.inspect(value, opts) end

---Offset, hex and printable bytes, 16 a line.
---@param bytes string
---@return string
function mw.hexdump(bytes) end

---Lower-case hex.
---@param bytes string
---@return string
function mw.hex(bytes) end

---The bytes of hex text (either case, white space skipped).
---@param text string
---@return string|nil bytes
---@return string? err
function mw.unhex(text) end

---RFC 4648 base64.
---@param bytes string
---@return string
function mw.base64(bytes) end

---The bytes of base64 text (also URL-safe, padding optional).
---@param text string
---@return string|nil bytes
---@return string? err
function mw.unbase64(text) end

---Declares thresholds checked at the end of the run: `{ ["metric:p99"] = "< 0.05" }`; exit 99 when one fails.
---@param list table<string, string|string[]>
function mw.thresholds(list) end

---Open load model: starts `fn` at a fixed rate, latency counted from the intended start.
---@param opts { rate?: number, duration?: number, stages?: { rate: number, duration: number }[], fn: function, max_in_flight?: integer, name?: string }
---@return table
function mw.rate(opts) end

---Closed load model: `count` virtual users each running `fn`.
---@param opts { count: integer, ramp?: number, fn: function, duration?: number, iterations?: integer, name?: string }
---@return { started: integer, iterations: integer, closed: integer }
function mw.vus(opts) end

---@class mw.log
---Logs at info: values joined by spaces, or a format string and its arguments.
---@overload fun(...: any)
mw.log = {}

---@param ... any
function mw.log.debug(...) end

---@param ... any
function mw.log.info(...) end

---@param ... any
function mw.log.warn(...) end

---@param ... any
function mw.log.error(...) end

---@class mw.json
---@field null lightuserdata JSON null, both ways
mw.json = {}

---JSON text of `value`; unencodable values raise, naming where.
---@param value any
---@param opts? { pretty?: boolean, indent?: string, sort_keys?: boolean }
---@return string
function mw.json.encode(value, opts) end

---The value of JSON text, or nil and why (line, column, byte).
---@param text string
---@return any value
---@return string? err
function mw.json.decode(text) end

---Marks `t` (or a new table) to encode as a JSON array even when empty.
---@param t? table
---@return table
function mw.json.array(t) end

---Marks `t` (or a new table) to encode as a JSON object even when empty.
---@param t? table
---@return table
function mw.json.object(t) end

---@class mw.msgpack
---@field null lightuserdata MessagePack nil (the same value as mw.json.null)
mw.msgpack = {}

---MessagePack bytes of `value` (smallest integers, float 64, map keys sorted by their
---encoded bytes); unencodable values raise, naming where.
---@param value any
---@return string
function mw.msgpack.encode(value) end

---The value of MessagePack bytes, or nil and why (path and byte).
---@param bytes string
---@param opts? { bytes?: "marker"|"string" }
---@return any value
---@return string? err
function mw.msgpack.decode(bytes, opts) end

---Marks `t` (or a new table) to encode as an array even when empty.
---@param t? table
---@return table
function mw.msgpack.array(t) end

---Marks `t` (or a new table) to encode as a map even when empty.
---@param t? table
---@return table
function mw.msgpack.object(t) end

---Bytes to write as bin, not str: `{ data = s }`.
---@param s string
---@return table
function mw.msgpack.bin(s) end

---An ext value: `{ type = n, data = s }`.
---@param type integer
---@param data string
---@return table
function mw.msgpack.ext(type, data) end

---@class mw.cbor
---@field null lightuserdata CBOR null (the same value as mw.json.null)
mw.cbor = {}

---CBOR bytes of `value` (shortest heads, float 64, RFC 8949 key order); unencodable
---values raise, naming where.
---@param value any
---@return string
function mw.cbor.encode(value) end

---The value of CBOR bytes, or nil and why (path and byte).
---@param bytes string
---@param opts? { bytes?: "marker"|"string" }
---@return any value
---@return string? err
function mw.cbor.decode(bytes, opts) end

---Marks `t` (or a new table) to encode as an array even when empty.
---@param t? table
---@return table
function mw.cbor.array(t) end

---Marks `t` (or a new table) to encode as a map even when empty.
---@param t? table
---@return table
function mw.cbor.object(t) end

---Bytes to write as a byte string, not a text string: `{ data = s }`.
---@param s string
---@return table
function mw.cbor.bytes(s) end

---A tagged value: `{ tag = n, value = v }`.
---@param tag integer
---@param value any
---@return table
function mw.cbor.tagged(tag, value) end

---@class mw.protobuf
mw.protobuf = {}

---Loads .proto files (their imports too) at run time; raises on a file that does not parse.
---@param paths string|string[]
---@param opts? { import_paths?: string[] }
function mw.protobuf.load(paths, opts) end

---The bytes of message `name` made from `value` (fields in number order); raises naming
---the field path of what cannot be encoded.
---@param name string
---@param value table
---@return string
function mw.protobuf.encode(name, value) end

---The table of message `name` read from `bytes`, or nil and why (the field path).
---@param name string
---@param bytes string
---@return table? value
---@return string? err
function mw.protobuf.decode(name, bytes) end

---A codec for connections and servers: every message is message `name`, or, with
---`{ select =, payload =, types = }`, an envelope whose type a field chooses.
---@param name string
---@param opts? { select?: string, payload?: string, types?: table<string, string> }
---@return mw.Codec
function mw.protobuf.codec(name, opts) end

---The unknown fields a decode kept in `t` (written back by encode), or nil.
---@param t table
---@return string?
function mw.protobuf.unknown(t) end

---The fields of message `name`.
---@param name string
---@return table
function mw.protobuf.fields(name) end

---The values of enum `name`: `{ NAME = number }`.
---@param name string
---@return table<string, integer>
function mw.protobuf.enum(name) end

---Every loaded message and enum type's full name.
---@return string[]
function mw.protobuf.types() end

---@class mw.metrics
mw.metrics = {}

---@param name string
---@param tags? table<string, string>
---@return mw.Counter
function mw.metrics.counter(name, tags) end

---@param name string
---@param tags? table<string, string>
---@return mw.Gauge
function mw.metrics.gauge(name, tags) end

---@param name string
---@param tags? table<string, string>
---@return mw.Histogram
function mw.metrics.histogram(name, tags) end

---A histogram of seconds: `local t = m:start() ... t:stop()`.
---@param name string
---@param tags? table<string, string>
---@return mw.Histogram
function mw.metrics.timer(name, tags) end

---A connection from mw.connect.
---@class mw.Connection
local Connection = {}

---@param fn fun(c: mw.Connection, info: mw.OpenInfo)
function Connection:on_open(fn) end

---@param fn fun(c: mw.Connection, msg: any, kind: mw.Kind)
function Connection:on_message(fn) end

---@param fn fun(c: mw.Connection, code: integer, reason: string, info: mw.CloseInfo)
function Connection:on_close(fn) end

---@param fn fun(c: mw.Connection, err: string, raw?: string)
function Connection:on_error(fn) end

---@param fn fun(c: mw.Connection, attempt: integer, delay: number): nil|false|{ delay?: number, url?: string, headers?: table<string, string> }
function Connection:on_reconnect(fn) end

---@param fn fun(c: mw.Connection)
function Connection:on_drain(fn) end

---@param fn fun(c: mw.Connection)
function Connection:on_ready(fn) end

---Sends (or queues while not open): true, or nil and "queue full" | "message too large" | "closed".
---@param data any
---@param kind? mw.Kind
---@return true|nil ok
---@return string? err
function Connection:send(data, kind) end

---With ready = "manual": past the held queue (the application's handshake).
---@param data any
---@param kind? mw.Kind
---@return true|nil ok
---@return string? err
function Connection:send_now(data, kind) end

---With ready = "manual": releases the held queue; false unless open and held.
---@return boolean
function Connection:ready() end

---A WebSocket ping now.
---@param payload? string
---@return boolean
function Connection:ping(payload) end

---Closes for good (no reconnect); returns how many queued messages it dropped.
---@param code? integer
---@param reason? string
---@return integer
function Connection:close(code, reason) end

---Changes the heartbeat at run time.
---@param opts mw.Heartbeat|false
function Connection:heartbeat(opts) end

---With no argument reconnects now; with a table or false changes the policy.
---@param opts? mw.Reconnect|false
function Connection:reconnect(opts) end

---@return "connecting"|"open"|"ready"|"closing"|"closed"|"reconnecting"
function Connection:state() end

---@return mw.Stats
function Connection:stats() end

---In a coroutine: the next message and its kind, or nil and "timeout" | "closed" | "decode: ...".
---@param timeout? number
---@return any msg
---@return string kind_or_err
function Connection:receive(timeout) end

---In a coroutine: true once open, or nil and why.
---@param timeout? number
---@return true|nil ok
---@return string? err
function Connection:wait_open(timeout) end

---In a coroutine: waits until the connection can take more.
---@param timeout? number
---@return true|nil ok
---@return string? err
function Connection:drain(timeout) end

---In a coroutine: sends `msg`, returns the first reply `match` accepts and its kind, or nil and why.
---@param msg any
---@param match? mw.Match
---@param timeout? number|mw.WaitOptions
---@return any reply
---@return string kind_or_err
function Connection:request(msg, match, timeout) end

---In a coroutine: the first inbound message `match` accepts (nil: any) and its kind, or nil and why.
---@param match? mw.Match
---@param timeout? number|mw.WaitOptions
---@return any msg
---@return string kind_or_err
function Connection:expect(match, timeout) end

---Answers the peer's pings matching `match` with `reply`.
---@param match mw.Match
---@param reply any|fun(msg: any, kind: mw.Kind): any
function Connection:answer(match, reply) end

---A server from mw.listen.
---@class mw.Server
local Server = {}

---@param fn fun(peer: mw.Peer, request: mw.Request)
function Server:on_connect(fn) end

---@param fn fun(peer: mw.Peer, msg: any, kind: mw.Kind)
function Server:on_message(fn) end

---@param fn fun(peer: mw.Peer, code: integer, reason: string)
function Server:on_close(fn) end

---Offers `data` to every peer; returns how many took it.
---@param data any
---@param kind? mw.Kind
---@return integer
function Server:broadcast(data, kind) end

---@return mw.Peer[]
function Server:peers() end

---@return string
function Server:url() end

---Stops listening and closes every peer with 1001.
function Server:close() end

---Refuses the next `n` handshakes with `status` (default 503).
---@param n integer
---@param status? integer
function Server:reject_next(n, status) end

---A client connected to a server.
---@class mw.Peer
---@field id integer
---@field remote_address string
local Peer = {}

---@param data any
---@param kind? mw.Kind
---@return true|nil ok
---@return string? err
function Peer:send(data, kind) end

---Returns how many queued messages it dropped, as c:close does.
---@param code? integer
---@param reason? string
---@return integer
function Peer:close(code, reason) end

---A WebSocket ping now, as c:ping: nil and "not open" when the peer is not open.
---@param payload? string
---@return true|nil ok
---@return string? err
function Peer:ping(payload) end

---@return mw.Stats
function Peer:stats() end

---@param fn fun(peer: mw.Peer)
function Peer:on_drain(fn) end

---@param timeout? number
---@return true|nil ok
---@return string? err
function Peer:drain(timeout) end

---Drops the TCP connection without a close frame (RST).
function Peer:abort() end

---Stops reading and answering pings for a while.
---@param seconds number
function Peer:pause(seconds) end

---Writes bytes as they are (hand-made frames).
---@param bytes string
function Peer:send_raw(bytes) end

---A timer from mw.after or mw.every.
---@class mw.Future
local Future = {}

---Sets the values and wakes every waiter, in the order they waited; false if already set.
---@param ... any
---@return boolean
function Future:set(...) end

---The values once set (at once if they are); nil and "timeout" after `timeout` seconds.
---@param timeout? number
---@return any ...
function Future:wait(timeout) end

---Whether `set` was called.
---@return boolean
function Future:is_set() end

---@class mw.Timer
local Timer = {}

---Stops it; true if it was still pending.
---@return boolean
function Timer:cancel() end

---@class mw.Counter
---@field name string
local Counter = {}

---@param n? number
function Counter:inc(n) end

---@param n number
function Counter:add(n) end

---@class mw.Gauge
---@field name string
local Gauge = {}

---@param v number
function Gauge:set(v) end

---@param d number
function Gauge:add(d) end

function Gauge:inc() end

function Gauge:dec() end

---@class mw.Histogram
---@field name string
local Histogram = {}

---@param v number
function Histogram:observe(v) end

---@return mw.Timing
function Histogram:start() end

---@class mw.Timing
local Timing = {}

---Records the seconds since start() and returns them.
---@return number
function Timing:stop() end

return mw
