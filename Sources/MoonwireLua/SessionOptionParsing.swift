import MoonwireCore
import NIOCore

/// The `opts` of `mw.connect`, checked: what ``OptionDeclarations/all`` declares for the
/// connect role, read into a connection's settings.
struct ConnectOptions {
    var configuration = ManagedConnection.Configuration()
    /// `record = FILE`, `record_secrets = true` (docs/recording.md).
    var record: String?
    var recordSecrets = false
    /// `codec = "json"`, `"msgpack"` or `"cbor"` (the prelude passes only these names on).
    var codec: NativeCodec?
    /// What every dial has (timeouts, TLS, proxy), whatever the transport turns out to be.
    var dial = DialOptions()
    var socket = WebSocketClientOptions()
    var tcp = TCPClientOptions()
    var maxMessage: Int?
    let isTCP: Bool
    private let custom: () -> CustomFraming

    /// How long the connection's close handshake may take, for the script's end.
    var closeTimeout: TimeAmount { dial.closeTimeout }

    init(_ value: LuaValue, function: String, url: TransportURL, custom: @escaping () -> CustomFraming) throws(LuaArgumentError) {
        if case .tcp = url { isTCP = true } else { isTCP = false }
        self.custom = custom
        var t = try LuaOptionTable(value, function: function, argument: 2)
        // A TCP connection has no ping: its heartbeat needs a message, so it is off unless given one.
        if isTCP { configuration.heartbeat = nil }
        try OptionDeclarations.parse(&t, \.connect, into: &self)
        if let n = maxMessage {
            socket.maxMessage = n
            if isTCP, tcp.framing == .line() { tcp.framing = .line(max: n) }
        }
        socket.dial = dial
        tcp.dial = dial
        configuration.socket = socket
        configuration.tcp = tcp
    }

    /// Refuses an option only a WebSocket has on a `tcp://` or `tls://` connection.
    func webSocketOnly(_ key: String, _ t: inout LuaOptionTable) throws(LuaArgumentError) {
        if isTCP { throw t.error(key, "only for ws:// and wss:// connections") }
    }

    /// `framing`: the TCP framing, or on a WebSocket a function over the messages' bytes.
    mutating func framing(_ t: inout LuaOptionTable) throws(LuaArgumentError) {
        guard let framing = try LuaFraming.parse(&t, custom: custom) else { return }
        if isTCP {
            tcp.framing = framing
            return
        }
        // The messages' bytes as one stream: several packets in one WebSocket message,
        // one packet across several (MQTT over WebSocket). What is sent stays one
        // message each, as with a framing function on TCP.
        guard framing.isCustom else {
            throw t.error("framing", "on ws:// and wss:// connections framing is a function fn(buffer) -> message, consumed (line, raw and the tables are for tcp:// and tls://)")
        }
        configuration.messageFraming = framing
    }

    /// `c:heartbeat(opts)`'s argument, wrapped as `{ heartbeat = opts }`.
    static func heartbeat(_ t: inout LuaOptionTable) throws(LuaArgumentError) -> (value: HeartbeatMonitor.Configuration?, Void)? {
        try HeartbeatOption.parse(&t, role: .connect, webSocket: true)
    }

    /// `c:reconnect(opts)`'s argument, wrapped as `{ reconnect = opts }`.
    static func reconnect(_ t: inout LuaOptionTable) throws(LuaArgumentError) -> (value: ReconnectPolicy?, Void)? {
        try ReconnectOption.parse(&t)
    }
}

/// The `opts` of `mw.listen`, checked: what ``OptionDeclarations/all`` declares for the
/// listen role, read into a server's settings.
struct ListenOptions {
    var server = MessageServerOptions()
    var codec: NativeCodec?
    let webSocket: Bool

    init(_ value: LuaValue, function: String, url: ServerURL) throws(LuaArgumentError) {
        webSocket = url.kind == .webSocket
        var t = try LuaOptionTable(value, function: function, argument: 2)
        try OptionDeclarations.parse(&t, \.listen, into: &self)
    }
}

/// `heartbeat`, for both roles and the `--heartbeat` flag: parsed here only.
public enum HeartbeatOption {
    /// A field given a value it cannot take, and why.
    public struct Misuse: Error, CustomStringConvertible {
        public let field: String
        public let message: String
        public var description: String { "\(field): \(message)" }
    }

    /// A client's heartbeat (`mw.connect`, `c:heartbeat`, `connect --heartbeat`): a probe
    /// after `interval` (default 30) seconds of silence, answered within `timeout`
    /// (default 10); the probe is a ping unless there is a `message`, and only a
    /// message matching `reply` answers when there is one.
    public static func client(interval: Double? = nil, timeout: Double? = nil, message: Bool = false, reply: Bool = false) throws(Misuse) -> HeartbeatMonitor.Configuration {
        let defaults = HeartbeatMonitor.Configuration()
        let interval = interval.map { TimeAmount.seconds($0) } ?? defaults.interval
        let timeout = timeout.map { TimeAmount.seconds($0) } ?? defaults.timeout
        guard interval > .zero else { throw Misuse(field: "interval", message: "must be more than 0 seconds") }
        guard timeout > .zero else { throw Misuse(field: "timeout", message: "must be more than 0 seconds") }
        guard message || !reply else { throw Misuse(field: "reply", message: "a reply pattern needs a heartbeat message") }
        let probe: HeartbeatMonitor.Configuration.Probe = message ? .message(reply: reply ? .matching : .anyMessage) : .ping
        return HeartbeatMonitor.Configuration(interval: interval, timeout: timeout, probe: probe)
    }

    /// A server's heartbeat (`mw.listen`): a peer silent for `interval` is probed (a ping
    /// on WebSocket) and dropped when `timeout` (default 10) more passes in silence. With
    /// `timeout` alone, WebSocket peers are pinged halfway through it.
    public static func server(interval: Double?, timeout: Double?, webSocket: Bool) throws(Misuse) -> HeartbeatMonitor.Configuration {
        if let interval {
            guard interval > 0 else { throw Misuse(field: "interval", message: "must be more than 0 seconds") }
            let t = timeout ?? 10
            guard t > 0 else { throw Misuse(field: "timeout", message: "must be more than 0 seconds") }
            return .init(interval: .seconds(interval), timeout: .seconds(t), probe: webSocket ? .ping : nil, watch: .inboundSilence)
        }
        guard let timeout, timeout > 0 else {
            throw Misuse(field: "timeout", message: "seconds above 0 expected: peers silent for longer are dropped")
        }
        return .dropSilentPeers(after: .seconds(timeout), ping: webSocket)
    }

    /// `heartbeat`: absent (nil), `false` (off), or a table over the defaults. What Swift
    /// cannot hold or check, the prelude has described: `message`, `reply` and a function
    /// `kind` are `{ type = type(v), quoted =, pattern_error = }` (it keeps the values).
    static func parse(_ t: inout LuaOptionTable, key: String = "heartbeat", role: SessionOption.Role, webSocket: Bool) throws(LuaArgumentError) -> (value: HeartbeatMonitor.Configuration?, Void)? {
        if case .boolean(false) = t.raw(key) { return (nil, ()) }
        guard var h = try t.table(key) else { return nil }
        let interval = try h.seconds("interval")
        let timeout = try h.seconds("timeout")
        var message = false, reply = false
        switch role {
        case .connect:
            message = try described(&h, "message", expected: "string or function")
            reply = try described(&h, "reply", expected: "Lua pattern or function", pattern: true)
            let kinds = ["text", "binary"]
            if case .table(let description) = h.raw("kind"), case .string(let type)? = description[.text("type")] {
                throw h.error("kind", "\(LuaOptionTable.alternatives(kinds)) expected, got \(String(decoding: type, as: UTF8.self))")
            }
            _ = try h.choice("kind", kinds)
        case .listen:
            for field in ["message", "reply", "kind"] where h.raw(field) != .nil {
                throw h.error(field, "a server's heartbeat has no message: it pings WebSocket peers and drops silent ones")
            }
        }
        try h.finish()
        let configuration: HeartbeatMonitor.Configuration
        do throws(Misuse) {
            switch role {
            case .connect: configuration = try client(interval: interval, timeout: timeout, message: message, reply: reply)
            case .listen: configuration = try server(interval: interval, timeout: timeout, webSocket: webSocket)
            }
        } catch {
            throw h.error(error.field, error.message)
        }
        if role == .connect, !webSocket, configuration.probe == .ping {
            throw t.error(key, "a tcp:// heartbeat needs a message (there is no ping)")
        }
        return (configuration, ())
    }

    /// Whether `field` was given, checked from the prelude's description of it.
    private static func described(_ h: inout LuaOptionTable, _ field: String, expected: String, pattern: Bool = false) throws(LuaArgumentError) -> Bool {
        guard case .table(let description) = h.raw(field) else { return false }
        var type = "nil"
        if case .string(let name)? = description[.text("type")] { type = String(decoding: name, as: UTF8.self) }
        guard type == "string" || type == "function" else { throw h.error(field, "\(expected) expected, got \(type)") }
        if pattern, case .string(let error)? = description[.text("pattern_error")], case .string(let quoted)? = description[.text("quoted")] {
            throw h.error(field, "bad Lua pattern \(String(decoding: quoted, as: UTF8.self)): \(String(decoding: error, as: UTF8.self))")
        }
        return true
    }
}

/// `reconnect`: absent (nil), `false` (off), or a table over the defaults.
enum ReconnectOption {
    static func parse(_ t: inout LuaOptionTable, key: String = "reconnect") throws(LuaArgumentError) -> (value: ReconnectPolicy?, Void)? {
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
            let reportable = Int(CloseCode.reportableRange.lowerBound)...Int(CloseCode.reportableRange.upperBound)
            for code in codes where !reportable.contains(code) {
                throw r.error("stop_codes", "close codes are \(CloseCode.reportableRangeText), got \(code)")
            }
            policy.stopCodes = Set(codes.map { UInt16($0) })
        }
        if let b = try r.boolean("retry_http") { policy.retryHTTP = b }
        try r.finish()
        return (policy, ())
    }
}

/// `queue = { limit = N, bytes = B, overflow = "drop_oldest" | "drop_newest" | "error" }`
/// over the defaults (1024, 16 MiB, "error"); limit and bytes must be positive.
enum QueueOption {
    typealias Overflow = SendQueue<OutboundMessage>.Overflow

    static func parse(_ t: inout LuaOptionTable) throws(LuaArgumentError) -> (limit: Int, bytes: Int, overflow: Overflow)? {
        guard var queue = try t.table("queue") else { return nil }
        var result: (limit: Int, bytes: Int, overflow: Overflow) = (1024, 16 << 20, .error)
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
        if let name = try queue.choice("overflow", ["drop_oldest", "drop_newest", "error"]) {
            result.overflow = Overflow(rawValue: name) ?? .error
        }
        try queue.finish()
        return result
    }
}

/// `proxy = "http://[user:pass@]host:port" | "socks5://host:port"`, or `false` for no
/// proxy whatever the environment says; absent: the environment's (nil).
enum ProxyOption {
    static func parse(_ t: inout LuaOptionTable) throws(LuaArgumentError) -> ProxyChoice? {
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
}

/// `tls = { ca, insecure, pin_sha256, server_name, cert, key }`.
enum TLSOption {
    static func parse(_ t: inout LuaOptionTable) throws(LuaArgumentError) -> TLSOptions? {
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
}

/// `auto_reply` as the prelude hands it on: only the rules of two strings, as a list of
/// `{ match =, reply = }` (it checked the option, and keeps the rules with a function).
enum AutoReplyOption {
    static func rules(_ value: OptionValue) -> AutoReply? {
        guard case .raw(.table(let list)) = value else { return nil }
        var rules: [AutoReply.Rule] = []
        var i: Int64 = 1
        while case .table(let rule)? = list[.integer(i)],
            case .string(let match)? = rule[.text("match")], case .string(let reply)? = rule[.text("reply")] {
            rules.append(AutoReply.Rule(match: match, reply: reply))
            i += 1
        }
        return rules.isEmpty ? nil : AutoReply(rules)
    }
}

extension TimeAmount {
    /// Seconds as a Lua number gives them.
    static func seconds(_ s: Double) -> TimeAmount { .nanoseconds(Int64(s * 1e9)) }
}
