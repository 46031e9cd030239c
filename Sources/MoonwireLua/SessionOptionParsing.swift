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

    /// What the fields of a `heartbeat` table said, before the role's rules
    /// (``client(interval:timeout:message:reply:)``, ``server(interval:timeout:webSocket:)``)
    /// make a configuration of them.
    struct Given {
        let role: SessionOption.Role
        var interval: Double?
        var timeout: Double?
        var message = false
        var reply = false

        /// A client's field given to a server's heartbeat is refused.
        func clientOnly(_ field: String, _ t: inout LuaOptionTable) throws(LuaArgumentError) {
            guard role == .listen else { return }
            throw t.error(field, "a server's heartbeat has no message: it pings WebSocket peers and drops silent ones")
        }
    }

    /// The fields of `heartbeat`, in the docs' order. What Swift cannot hold or check, the
    /// prelude has described: `message`, `reply` and a function `kind` arrive as
    /// `{ type = type(v), quoted =, pattern_error = }` (it keeps the values). A server's
    /// heartbeat takes `interval` and `timeout` only.
    static let fields: [OptionField<Given>] = {
        let defaults = HeartbeatMonitor.Configuration()
        let kinds = ["text", "binary"]
        return [
            OptionField(
                "interval", .seconds, doc: "seconds of silence before a probe",
                defaultText: "\(defaults.interval.secondsText) (a server: none, see `timeout`)"
            ) { h, v, _ in h.interval = v.double },
            OptionField(
                "timeout", .seconds, doc: "seconds the probe's answer may take",
                defaultText: defaults.timeout.secondsText
            ) { h, v, _ in h.timeout = v.double },
            describedField(
                "message", expected: "string or function", lua: "string|fun(): string", into: \.message,
                doc: "the probe (a function returns it), sent as it is, not through the codec; without it, a WebSocket ping. A client's only",
                defaultText: "none: a ping"
            ),
            describedField(
                "reply", expected: "Lua pattern or function", lua: "string|fun(msg: any): boolean", pattern: true, into: \.reply,
                doc: "a Lua pattern matched against the message as received, or a function `fn(msg) -> bool` given it after the codec: only a matching message answers the probe, and it is consumed. Needs `message`",
                defaultText: "none: any message answers"
            ),
            OptionField(
                "kind", .custom(OptionType.choice(kinds).docText, lua: "mw.Kind"),
                doc: "the probe's kind. A client's only",
                defaultText: "the connection's `kind`, else text when the message is valid UTF-8"
            ) { h, v, t throws(LuaArgumentError) in
                try h.clientOnly("kind", &t)
                if case .raw(.table(let description)) = v, case .string(let type)? = description[.text("type")] {
                    throw t.error("kind", "\(LuaOptionTable.alternatives(kinds)) expected, got \(String(decoding: type, as: UTF8.self))")
                }
                _ = try t.choice("kind", kinds)
            },
        ]
    }()

    /// A client's field the prelude described (`message`, `reply`): given or not, checked
    /// against what it may be (`expected`, and with `pattern` a Lua pattern that compiles).
    private static func describedField(
        _ name: String, expected: String, lua: String, pattern: Bool = false, into given: WritableKeyPath<Given, Bool>,
        doc: String, defaultText: String
    ) -> OptionField<Given> {
        OptionField(name, .custom(expected, lua: lua), doc: doc, defaultText: defaultText) { h, _, t throws(LuaArgumentError) in
            try h.clientOnly(name, &t)
            h[keyPath: given] = try described(&t, name, expected: expected, pattern: pattern)
        }
    }

    /// `heartbeat`: absent (nil), `false` (off), or a table over the defaults (``fields``).
    static func parse(_ t: inout LuaOptionTable, key: String = "heartbeat", role: SessionOption.Role, webSocket: Bool) throws(LuaArgumentError) -> (value: HeartbeatMonitor.Configuration?, Void)? {
        if case .boolean(false) = t.raw(key) { return (nil, ()) }
        guard var h = try t.table(key) else { return nil }
        var given = Given(role: role)
        try OptionField.read(fields, from: &h, into: &given)
        let configuration: HeartbeatMonitor.Configuration
        do throws(Misuse) {
            switch role {
            case .connect: configuration = try client(interval: given.interval, timeout: given.timeout, message: given.message, reply: given.reply)
            case .listen: configuration = try server(interval: given.interval, timeout: given.timeout, webSocket: webSocket)
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
    /// The fields of `reconnect`, in the docs' order; their defaults are `ReconnectPolicy()`'s.
    static let fields: [OptionField<ReconnectPolicy>] = {
        let defaults = ReconnectPolicy()
        return [
            OptionField("initial", .seconds, doc: "seconds before the first attempt after a loss", defaultText: defaults.initial.secondsText) { p, v, _ in
                p.initial = v.seconds
            },
            OptionField("factor", .number("number ≥ 1"), doc: "each delay is this many times the one before (at least 1)", defaultText: defaults.factor.shortText) {
                p, v, t throws(LuaArgumentError) in
                guard v.double >= 1, v.double.isFinite else { throw t.error("factor", "must be a number of at least 1") }
                p.factor = v.double
            },
            OptionField("max", .seconds, doc: "the longest delay, before jitter", defaultText: defaults.max.secondsText) { p, v, _ in p.max = v.seconds },
            OptionField(
                "jitter", .number("number, 0 to 1"),
                doc: "each delay is spread by up to this fraction either way (0 to 1), so that many bots do not come back in step",
                defaultText: defaults.jitter.shortText
            ) { p, v, t throws(LuaArgumentError) in
                guard (0...1).contains(v.double) else { throw t.error("jitter", "must be a fraction from 0 to 1") }
                p.jitter = v.double
            },
            OptionField(
                "attempts", .number("integer ≥ 0 or `math.huge`"),
                doc: "the most attempts after each loss; `math.huge` for ever. A successful open starts the count again",
                defaultText: defaults.attempts.map(String.init) ?? "`math.huge`"
            ) { p, v, t throws(LuaArgumentError) in
                let a = v.double
                if a == .infinity {
                    p.attempts = nil
                } else {
                    guard a >= 0, a.rounded() == a else { throw t.error("attempts", "a whole number of at least 0, or math.huge") }
                    p.attempts = Int(a)
                }
            },
            OptionField(
                "stop_codes", .integers,
                doc: "close codes from the peer that end the connection for good, on top of 1003 and 1008 (\(CloseCode.reportableRangeText)), e.g. `{ 4001, 4003 }` for an application's \"banned\" and \"logged in elsewhere\"",
                defaultText: "none"
            ) { p, v, t throws(LuaArgumentError) in
                let reportable = Int(CloseCode.reportableRange.lowerBound)...Int(CloseCode.reportableRange.upperBound)
                for code in v.ints where !reportable.contains(code) {
                    throw t.error("stop_codes", "close codes are \(CloseCode.reportableRangeText), got \(code)")
                }
                p.stopCodes = Set(v.ints.map { UInt16($0) })
            },
            OptionField(
                "on_normal_close", .boolean,
                doc: "whether a close code 1000 from the peer reconnects. Servers say 1000 (or 1001) when they shut down for a restart, so it does; `false` treats the peer's 1000 as \"we are done, do not come back\"",
                defaultText: "`\(defaults.onNormalClose)`"
            ) { p, v, _ in p.onNormalClose = v.bool },
            OptionField(
                "retry_http", .boolean,
                doc: "whether a handshake the server refused with an HTTP 4xx status (401, 403, 404) is retried. Such refusals rarely change by themselves, so they end the connection unless this is `true` (a server that answers 429 or 404 while it starts)",
                defaultText: "`\(defaults.retryHTTP)`"
            ) { p, v, _ in p.retryHTTP = v.bool },
        ]
    }()

    static func parse(_ t: inout LuaOptionTable, key: String = "reconnect") throws(LuaArgumentError) -> (value: ReconnectPolicy?, Void)? {
        if case .boolean(false) = t.raw(key) { return (nil, ()) }
        guard var r = try t.table(key) else { return nil }
        var policy = ReconnectPolicy()
        try OptionField.read(fields, from: &r, into: &policy)
        return (policy, ())
    }
}

/// `queue = { limit = N, bytes = B, overflow = "drop_oldest" | "drop_newest" | "error" }`
/// over the defaults; limit and bytes must be positive.
enum QueueOption {
    typealias Overflow = SendQueue<OutboundMessage>.Overflow
    typealias Settings = (limit: Int, bytes: Int, overflow: Overflow)
    static let defaults: Settings = (1024, 16 << 20, .error)

    /// The fields of `queue`, in the docs' order.
    static let fields: [OptionField<Settings>] = [
        OptionField("limit", .count, doc: "the most messages waiting to be written", defaultText: "\(defaults.limit)") { q, v, _ in q.limit = v.int },
        OptionField("bytes", .count, doc: "the most bytes waiting to be written", defaultText: "\(defaults.bytes >> 20) MiB") { q, v, _ in q.bytes = v.int },
        OptionField(
            "overflow", .choice(Overflow.allCases.map(\.rawValue)),
            doc: "what a send does when either is reached: `\"error\"` refuses it (`nil, \"queue full ...\"`), `\"drop_oldest\"` throws away the oldest waiting messages to make room, `\"drop_newest\"` drops the new one; drops are counted",
            defaultText: "`\"\(defaults.overflow.rawValue)\"`"
        ) { q, v, _ in q.overflow = Overflow(rawValue: v.text) ?? .error },
    ]

    static func parse(_ t: inout LuaOptionTable) throws(LuaArgumentError) -> Settings? {
        guard var queue = try t.table("queue") else { return nil }
        var result = defaults
        try OptionField.read(fields, from: &queue, into: &result)
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
    /// The fields of `tls`, in the docs' order.
    static let fields: [OptionField<TLSOptions>] = [
        OptionField("ca", .string, doc: "a PEM file of the CAs to trust: a client trusts these instead of the system's; a server asks every client for a certificate these signed", defaultText: "system trust (client), none (server)") {
            o, v, _ in o.caFile = v.text
        },
        OptionField("insecure", .boolean, doc: "a client skips verifying the server's certificate (for tests; pins are still held)", defaultText: "`false`") {
            o, v, _ in o.insecure = v.bool
        },
        OptionField(
            "pin_sha256", .strings,
            doc: "a client trusts a server whose chain has a key with one of these pins (base64 SHA-256 of the DER SubjectPublicKeyInfo, `sha256/` prefix optional) instead of the CAs",
            defaultText: "none"
        ) { o, v, _ in
            o.pinSHA256 = v.list
        },
        OptionField("server_name", .string, doc: "the name a client sends (SNI) and verifies", defaultText: "the URL's host") { o, v, _ in o.serverName = v.text },
        OptionField("cert", .string, doc: "a PEM certificate (chain) file: a server's own (required), or a client's for mutual TLS", defaultText: "none") { o, v, _ in
            o.certificateFile = v.text
        },
        OptionField("key", .string, doc: "the PEM private key file of `cert`", defaultText: "none") { o, v, _ in o.privateKeyFile = v.text },
    ]

    static func parse(_ t: inout LuaOptionTable) throws(LuaArgumentError) -> TLSOptions? {
        guard var table = try t.table("tls") else { return nil }
        var tls = TLSOptions()
        try OptionField.read(fields, from: &table, into: &tls)
        return tls
    }
}

extension TimeAmount {
    /// `1`, `0.5`: seconds as the docs write them.
    var secondsText: String { (Double(nanoseconds) / 1e9).shortText }
}

extension Double {
    /// `2`, `0.2`: the shortest form.
    var shortText: String { rounded() == self && abs(self) < 1e15 ? String(Int64(self)) : String(self) }
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
