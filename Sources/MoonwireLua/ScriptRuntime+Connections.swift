import CLua
import CLuaShim
import MoonwireCore
import NIOCore

/// `mw.connect` and the connection methods implemented in Swift; the prelude
/// adds the Lua ones (on_*, receive, wait_open, request, the codec).
extension ScriptRuntime {
    /// The prelude's dispatchers of a session's events (`message` and `drain` for both
    /// roles, the rest a client's).
    /// Numbered so that a dispatcher is found by position: a dictionary keyed by
    /// the name would hash it for every message.
    enum ConnectionEvent: Int, CaseIterable {
        case open, message, close, error, reconnect, heartbeatMessage, heartbeatReply, frame, drain

        /// The dispatcher's name in the prelude's `events` table.
        var name: String {
            switch self {
            case .heartbeatMessage: "heartbeat_message"
            case .heartbeatReply: "heartbeat_reply"
            default: "\(self)"
            }
        }
    }

    /// The methods only a client has; with ``sessionMethods``, those of `c:`.
    static let connectionMethods = LuaFunctions<ScriptRuntime>.methods(of: "c", sessionMethods + [
        LuaFunction("heartbeat", wrapped: true) { rt, args in
            let c = try rt.connection(args)
            var holder = try LuaOptionTable(.table([.text("heartbeat"): try args.lua.value(at: args.index(1))]), function: args.function, argument: 1, path: "")
            guard let setting = try ConnectOptions.heartbeat(&holder) else { throw args.typeError(1, expected: "table or false") }
            c.connection.setHeartbeat(setting.value)
            return 0
        },
        LuaFunction("reconnect") { rt, args in
            let c = try rt.connection(args)
            if args.type(1) == LUA_TNONE {
                c.connection.reconnectNow()
                rt.connectionRevived(c, userdata: args)
                return 0
            }
            var holder = try LuaOptionTable(.table([.text("reconnect"): try args.lua.value(at: args.index(1))]), function: args.function, argument: 1, path: "")
            guard let setting = try ConnectOptions.reconnect(&holder) else { throw args.typeError(1, expected: "table or false") }
            c.connection.setReconnect(setting.value)
            return 0
        },
        LuaFunction("send_now", wrapped: true) { rt, args in
            try rt.withConnection(args) { c in try rt.send(args, on: c, now: true) { c.connection.sendNow(bytes: $0, kind: $1) } }
        },
        LuaFunction("ready", wrapped: true) { rt, args in
            args.lua.push(try rt.connection(args).connection.ready())
            return 1
        },
        LuaFunction("state") { rt, args in
            args.lua.push(try rt.connection(args).connection.state)
            return 1
        },
        // For the prelude's inbox: stop (true) or resume (false) reading from the socket.
        LuaFunction("_pause_reading", shownAs: "c:receive") { rt, args in
            try rt.connection(args).connection.readingPaused = args.boolean(1)
            return 0
        },
    ])

    func connection(_ args: LuaArguments) throws(LuaArgumentError) -> LuaConnection {
        try args.object(class: LuaConnection.className, expected: LuaConnection.typeName)
    }

    /// ``connection(_:)`` for the length of `body`, not retained: for the methods called
    /// per message.
    func withConnection<R>(_ args: LuaArguments, _ body: (LuaConnection) throws -> R) throws -> R {
        try args.withObject(class: LuaConnection.className, expected: LuaConnection.typeName, body)
    }

    /// `host.connect(url, opts)`: the prelude has taken out the codec.
    func connect(_ args: LuaArguments) throws -> Int32 {
        let (text, url) = try endpoint(args, TransportURL.init)
        let opts = try args.value(2)
        let framer = LuaFramer(runtime: self)
        var parsed = try ConnectOptions(opts, function: args.function, url: url, custom: framer.framing)
        parsed.configuration.sendBudget = sendBudget
        let managed = ManagedConnection(url: url, configuration: parsed.configuration, eventLoop: eventLoop)
        managed.logger = options.logger
        managed.recorder = try recorder(parsed, url: text, args: args)
        let c = LuaConnection(runtime: self, connection: managed, closeTimeout: parsed.closeTimeout, codec: parsed.codec)
        framer.connection = c
        managed.delegate = c
        c.handle = args.lua.pushHandle(object: c, class: LuaConnection.className)
        connections[ObjectIdentifier(c)] = c
        metrics.dialing(c)
        // Dial on the next loop turn, so handlers set right after mw.connect see every event.
        eventLoop.execute { managed.start() }
        return 1
    }

    /// The URL that `mw.connect` or `mw.listen` got as argument 1, parsed; nothing new
    /// starts once the runtime is shutting down on a signal.
    func endpoint<URL>(_ args: LuaArguments, _ parse: (String) throws -> URL) throws -> (text: String, url: URL) {
        if shutdownCode != nil { throw LuaError.exit }
        let text = try args.string(1)
        do {
            return (text, try parse(text))
        } catch {
            throw args.error(1, "\(error)")
        }
    }

    /// `opts.record` gets a file of its own; else `run --record`'s file, if any.
    private func recorder(_ parsed: ConnectOptions, url: String, args: LuaArguments) throws -> ConnectionRecorder? {
        let headers = parsed.configuration.socket.headers
        guard let path = parsed.record else { return options.recorder?.connection(url: url, headers: headers) }
        do {
            let session = try SessionRecorder(path: path, toolVersion: Self.version, url: url, headers: headers, recordSecrets: parsed.recordSecrets)
            return session.connection(url: url, headers: headers)
        } catch {
            throw args.error(2, "opts.record: \(error)")
        }
    }

    /// The warning a connection or peer logs the first time its budget turned a message away.
    func warnBudgetReached(_ what: String, queued: Int, buffered: Int) {
        options.logger.warning("\(what) reached its send budget (\(queued) messages, \(buffered) bytes waiting): sends are refused or dropped until it drains")
    }

    /// Calls the prelude's dispatcher for `event` with the session (a connection or a
    /// peer) and what `push` pushes.
    func dispatch(_ event: ConnectionEvent, for c: LuaSession, push: (LuaState) -> Int32) {
        callDispatcher(connectionEvents[event.rawValue], with: c.handle, push: push)
    }

    /// Calls one of the prelude's dispatchers with an object's handle and what `push`
    /// pushes: the one way events of connections, servers and peers enter Lua.
    @inline(__always)
    func callDispatcher(_ dispatcher: LuaReference?, with handle: LuaReference?, push: (LuaState) -> Int32) {
        guard let dispatcher, let handle, !finished else { return }
        lua.push(dispatcher)
        lua.push(handle)
        let n = push(lua)
        callIntoLua(arguments: 1 + n)
    }

    /// Like `dispatch`, for the events whose handlers answer: the first result.
    func dispatchReturning(_ event: ConnectionEvent, for c: LuaConnection, push: (LuaState) -> Int32) -> LuaValue? {
        dispatchReturning(event, for: c, results: 1, push: push)?.first
    }

    /// The first `results` values the dispatcher returned (nil on error).
    func dispatchReturning(_ event: ConnectionEvent, for c: LuaConnection, results: Int32, push: (LuaState) -> Int32) -> [LuaValue]? {
        guard let dispatcher = connectionEvents[event.rawValue], let handle = c.handle, !finished else { return nil }
        lua.push(dispatcher)
        lua.push(handle)
        let n = push(lua)
        guard callIntoLua(arguments: 1 + n, results: results) else { return nil }
        defer { lua.pop(results) }
        return (0..<results).map { (try? lua.value(at: -results + $0)) ?? .nil }
    }

    /// What `on_reconnect` answered: nil goes ahead, false stops, a table changes
    /// the delay, URL or headers of the next attempt. A bad answer is reported and
    /// the attempt goes ahead unchanged.
    func retryDecision(from answer: LuaValue?) -> ManagedConnection.RetryDecision {
        switch answer {
        case .boolean(false)?: return .init(answer: .stop)
        case .table?:
            do {
                var t = try LuaOptionTable(answer ?? .nil, function: "on_reconnect", argument: 0, path: "answer")
                var decision = ManagedConnection.RetryDecision()
                if let delay = try t.seconds("delay") { decision.answer = .delay(.nanoseconds(Int64(delay * 1e9))) }
                if let url = try t.string("url") {
                    do {
                        decision.url = try TransportURL(url)
                    } catch {
                        throw t.error("url", error.description)
                    }
                }
                decision.headers = try t.stringMap("headers")
                try t.finish()
                return decision
            } catch {
                uncaught("on_reconnect: \(error)")
                return .init()
            }
        default: return .init()
        }
    }

    /// `c:reconnect()` on a closed connection brings it back to life. The handle
    /// is the script's own userdata (the method's self): the prelude keys its state by it.
    func connectionRevived(_ c: LuaConnection, userdata args: LuaArguments) {
        guard c.connection.isAlive, c.handle == nil else { return }
        args.lua.pushValue(args.index(0))
        c.handle = args.lua.reference()
        connections[ObjectIdentifier(c)] = c
        metrics.revived(c)
    }

    /// The connection is closed for good: it no longer keeps the script alive,
    /// and its userdata may be collected once the script drops it.
    func connectionEnded(_ c: LuaConnection) {
        metrics.ended(c)
        connections[ObjectIdentifier(c)] = nil
        if let handle = c.handle { lua.release(handle) }
        c.handle = nil
        if let code = shutdownCode, connections.isEmpty { finish(code) }
        // Inside a call into Lua (a TCP c:close() ends its connection before it returns),
        // the script may still start a timer: the call's end decides (callIntoLua).
        if finished { connectionsEnded() } else if !isAlive && callDepth == 0 { finish(shutdownCode ?? 0) }
    }
}

/// The `opts` of `mw.connect`, checked.
struct ConnectOptions {
    var configuration = ManagedConnection.Configuration()
    /// `record = FILE`, `record_secrets = true` (docs/recording.md).
    var record: String?
    var recordSecrets = false
    /// `codec = "json"`, `"msgpack"` or `"cbor"` (the prelude passes only these names on).
    var codec: NativeCodec?

    /// How long the connection's close handshake may take, for the script's end.
    var closeTimeout: TimeAmount {
        if case .tcp = url { return configuration.tcp.closeTimeout }
        return configuration.socket.closeTimeout
    }
    private let url: TransportURL

    init(_ value: LuaValue, function: String, url: TransportURL, custom: @escaping () -> CustomFraming) throws(LuaArgumentError) {
        self.url = url
        var t = try LuaOptionTable(value, function: function, argument: 2)
        var socket = WebSocketClientOptions()
        var tcp = TCPClientOptions()
        let isTCP: Bool
        if case .tcp = url { isTCP = true } else { isTCP = false }
        if isTCP {
            for key in ["headers", "protocols", "compress"] where t.raw(key) != .nil {
                throw t.error(key, "only for ws:// and wss:// connections")
            }
        }
        if let headers = try t.stringMap("headers") { socket.headers = headers }
        if let protocols = try t.strings("protocols") { socket.protocols = protocols }
        if let s = try t.seconds("connect_timeout") {
            socket.connectTimeout = .seconds(s)
            tcp.connectTimeout = .seconds(s)
        }
        if let s = try t.seconds("close_timeout") {
            socket.closeTimeout = .seconds(s)
            tcp.closeTimeout = .seconds(s)
        }
        let maxMessage = try t.integer("max_message", min: 1)
        if let n = maxMessage { socket.maxMessage = n }
        if let b = try t.boolean("compress") { socket.compress = b }
        if let tls = try Self.tls(&t) {
            socket.tls = tls
            tcp.tls = tls
        }
        if let proxy = try Self.proxy(&t) {
            socket.proxy = proxy
            tcp.proxy = proxy
        }
        if let framing = try LuaFraming.parse(&t, custom: custom) {
            if isTCP {
                tcp.framing = framing
            } else {
                // The messages' bytes as one stream: several packets in one WebSocket message,
                // one packet across several (MQTT over WebSocket). What is sent stays one
                // message each, as with a framing function on TCP.
                guard case .custom = framing else {
                    throw t.error("framing", "on ws:// and wss:// connections framing is a function fn(buffer) -> message, consumed (line, raw and the tables are for tcp:// and tls://)")
                }
                configuration.messageFraming = framing
            }
        }
        if isTCP, let n = maxMessage, case .line = tcp.framing { tcp.framing = .line(max: n) }
        configuration.socket = socket
        configuration.tcp = tcp
        // A TCP connection has no ping: its heartbeat needs a message, so it is off unless given one.
        if isTCP { configuration.heartbeat = nil }
        if let queue = try Self.queue(&t) {
            (configuration.queueLimit, configuration.queueBytes, configuration.overflow) = queue
        }
        if let heartbeat = try Self.heartbeat(&t) {
            if isTCP, let h = heartbeat.value, h.probe == .ping {
                throw t.error("heartbeat", "a tcp:// heartbeat needs a message (there is no ping)")
            }
            configuration.heartbeat = heartbeat.value
        }
        if let reconnect = try Self.reconnect(&t) { configuration.reconnect = reconnect.value }
        if let ready = try t.string("ready") {
            guard ready == "open" || ready == "manual" else { throw t.error("ready", "\"open\" or \"manual\" expected, got \"\(ready)\"") }
            configuration.manualReady = ready == "manual"
        }
        configuration.autoReply = Self.autoReply(&t)
        record = try t.string("record")
        recordSecrets = try t.boolean("record_secrets") ?? false
        codec = try NativeCodec(&t)
        try t.finish()
    }

    /// `auto_reply` as the prelude hands it on: only the rules of two strings, as a list of
    /// `{ match =, reply = }` (it checked the option, and keeps the rules with a function).
    static func autoReply(_ t: inout LuaOptionTable) -> AutoReply? {
        guard case .table(let list) = t.raw("auto_reply") else { return nil }
        var rules: [AutoReply.Rule] = []
        var i: Int64 = 1
        while case .table(let rule)? = list[.integer(i)],
            case .string(let match)? = rule[.text("match")], case .string(let reply)? = rule[.text("reply")] {
            rules.append(AutoReply.Rule(match: match, reply: reply))
            i += 1
        }
        return rules.isEmpty ? nil : AutoReply(rules)
    }

    /// `queue = { limit = N, bytes = B, overflow = "drop_oldest" | "drop_newest" | "error" }`
    /// over the defaults (1024, 16 MiB, "error"); limit and bytes must be positive.
    static func queue(_ t: inout LuaOptionTable) throws(LuaArgumentError) -> (limit: Int, bytes: Int, overflow: SendQueue<OutboundMessage>.Overflow)? {
        guard var queue = try t.table("queue") else { return nil }
        var result: (limit: Int, bytes: Int, overflow: SendQueue<OutboundMessage>.Overflow) = (1024, 16 << 20, .error)
        for key in ["limit", "bytes"] {
            let value = queue.raw(key)
            let n: Int
            switch value {
            case .nil: continue
            case .integer(let i) where i > 0: n = Int(i)
            case .number(let d) where d >= 1 && d < 9e18 && d.rounded() == d: n = Int(d)
            case .integer(let i): throw queue.error(key, "a positive number expected, got \(i)")
            case .number(let d): throw queue.error(key, "a positive number expected, got \(d)")
            default: throw queue.error(key, "a positive number expected, got \(value.typeName)")
            }
            if key == "limit" { result.limit = n } else { result.bytes = n }
        }
        if let name = try queue.string("overflow") {
            guard let overflow = SendQueue<OutboundMessage>.Overflow(rawValue: name) else {
                throw queue.error("overflow", "\"drop_oldest\", \"drop_newest\" or \"error\" expected, got \"\(name)\"")
            }
            result.overflow = overflow
        }
        try queue.finish()
        return result
    }

    /// `proxy = "http://[user:pass@]host:port" | "socks5://host:port"`, or `false` for no
    /// proxy whatever the environment says; absent: the environment's (nil).
    static func proxy(_ t: inout LuaOptionTable) throws(LuaArgumentError) -> ProxyChoice? {
        switch t.raw("proxy") {
        case .nil: return nil
        case .boolean(false): return .direct
        case .string(let bytes):
            do {
                return .through(try ProxySettings(String(decoding: bytes, as: UTF8.self)))
            } catch {
                throw t.error("proxy", error.message)
            }
        case let other:
            throw t.error("proxy", "a proxy URL or false expected, got \(other.typeName)")
        }
    }

    /// `tls = { ca, insecure, pin_sha256, server_name, cert, key }`.
    static func tls(_ t: inout LuaOptionTable) throws(LuaArgumentError) -> TLSOptions? {
        guard var table = try t.table("tls") else { return nil }
        var tls = TLSOptions()
        tls.caFile = try table.string("ca")
        tls.insecure = try table.boolean("insecure") ?? false
        tls.pinSHA256 = try table.strings("pin_sha256") ?? []
        tls.serverName = try table.string("server_name")
        tls.certificateFile = try table.string("cert")
        tls.privateKeyFile = try table.string("key")
        try table.finish()
        return tls
    }

    /// `heartbeat`: absent (nil), `false` (off), or a table over the defaults. The
    /// prelude has replaced `message` and `reply` by `true` and keeps them itself.
    static func heartbeat(_ t: inout LuaOptionTable, key: String = "heartbeat") throws(LuaArgumentError) -> (value: HeartbeatMonitor.Configuration?, Void)? {
        if case .boolean(false) = t.raw(key) { return (nil, ()) }
        guard var h = try t.table(key) else { return nil }
        let defaults = HeartbeatMonitor.Configuration()
        let interval = try h.seconds("interval").map { TimeAmount.seconds($0) } ?? defaults.interval
        let timeout = try h.seconds("timeout").map { TimeAmount.seconds($0) } ?? defaults.timeout
        guard interval > .zero else { throw h.error("interval", "must be more than 0 seconds") }
        guard timeout > .zero else { throw h.error("timeout", "must be more than 0 seconds") }
        let message = try h.boolean("message") ?? false
        let reply = try h.boolean("reply") ?? false
        guard message || !reply else { throw h.error("reply", "a reply pattern needs a heartbeat message") }
        try h.finish()
        let probe: HeartbeatMonitor.Configuration.Probe = message ? .message(reply: reply ? .matching : .anyMessage) : .ping
        return (HeartbeatMonitor.Configuration(interval: interval, timeout: timeout, probe: probe), ())
    }

    /// `reconnect`: absent (nil), `false` (off), or a table over the defaults.
    static func reconnect(_ t: inout LuaOptionTable, key: String = "reconnect") throws(LuaArgumentError) -> (value: ReconnectPolicy?, Void)? {
        if case .boolean(false) = t.raw(key) { return (nil, ()) }
        guard var r = try t.table(key) else { return nil }
        var policy = ReconnectPolicy()
        if let s = try r.seconds("initial") { policy.initial = .seconds(s) }
        if let s = try r.seconds("max") { policy.max = .seconds(s) }
        if let f = try r.number("factor") {
            guard f >= 1, f.isFinite else { throw r.error("factor", "must be a number of at least 1") }
            policy.factor = f
        }
        if let j = try r.number("jitter") {
            guard (0...1).contains(j) else { throw r.error("jitter", "must be a fraction from 0 to 1") }
            policy.jitter = j
        }
        if let a = try r.number("attempts") {
            if a == .infinity {
                policy.attempts = nil
            } else {
                guard a >= 0, a.rounded() == a else { throw r.error("attempts", "a whole number of at least 0, or math.huge") }
                policy.attempts = Int(a)
            }
        }
        if let b = try r.boolean("on_normal_close") { policy.onNormalClose = b }
        if let codes = try r.integers("stop_codes") {
            for code in codes where !(1000...4999).contains(code) {
                throw r.error("stop_codes", "close codes are 1000 to 4999, got \(code)")
            }
            policy.stopCodes = Set(codes.map { UInt16($0) })
        }
        if let b = try r.boolean("retry_http") { policy.retryHTTP = b }
        try r.finish()
        return (policy, ())
    }
}

extension TimeAmount {
    /// Seconds as a Lua number gives them.
    static func seconds(_ s: Double) -> TimeAmount { .nanoseconds(Int64(s * 1e9)) }
}

/// A Lua framing function (the `framing` option) as a Core decoder: `fn(buffer) -> message,
/// consumed | nil`, called through the prelude with the bytes buffered so far.
final class LuaFramer {
    weak var runtime: ScriptRuntime?
    weak var connection: LuaConnection?

    init(runtime: ScriptRuntime) {
        self.runtime = runtime
    }

    func framing() -> CustomFraming {
        // Held strongly by the decoder; the framer holds the connection weakly, so no cycle.
        CustomFraming { buffer in
            guard let connection = self.connection, let runtime = self.runtime else { return nil }
            return try runtime.frame(&buffer, for: connection)
        }
    }
}

/// Why a Lua framing function could not frame.
struct LuaFramingError: Error, CustomStringConvertible {
    let description: String
}

extension ScriptRuntime {
    func frame(_ buffer: inout ByteBuffer, for c: LuaConnection) throws -> ByteBuffer? {
        let bytes = buffer
        guard let results = dispatchReturning(.frame, for: c, results: 2, push: { lua in
            bytes.withUnsafeReadableBytes { lua.push(bytes: $0) }
            return 1
        }) else { throw LuaFramingError(description: "the framing function failed") }
        switch (results[0], results[1]) {
        case (.nil, _):
            return nil
        case (.string(let message), .integer(let consumed)) where consumed > 0 && consumed <= buffer.readableBytes:
            buffer.moveReaderIndex(forwardBy: Int(consumed))
            return ByteBuffer(bytes: message)
        default:
            throw LuaFramingError(description: "the framing function must return a message and the bytes it consumed (1 to \(buffer.readableBytes)), or nil")
        }
    }
}

extension LuaArguments {
    /// `close([code [, reason]])` of a connection or a peer: a code a close frame
    /// may carry (default 1000) and a reason of at most 123 bytes, else misuse.
    func closeCodeAndReason() throws(LuaArgumentError) -> (code: UInt16, reason: String) {
        let code = try optionalInteger(1) ?? 1000
        // The code is checked before argument 2 is read, so a bad code is reported first.
        guard (try? WebSocketClose(code: code, reason: "")) != nil else {
            throw error(1, "close code \(code) may not be sent (1000 to 1003, 1007 to 1014, or 3000 to 4999)")
        }
        let reason = isNoneOrNil(2) ? "" : try string(2)
        guard let close = try? WebSocketClose(code: code, reason: reason) else {
            throw error(2, "a close reason is at most \(WebSocketClose.maxReason) bytes")
        }
        return (close.code, close.reason)
    }
}
