import MoonwireCore
import NIOCore

/// The options of `mw.connect` and `mw.listen`, each declared once: its name, the type
/// and range of its value, its default, its line in the docs, which of the two takes it,
/// the `connect` / `listen` flags that set it, and how a value goes into each role's
/// settings. The Lua option parser (``OptionDeclarations/parse(_:_:into:)``), the docs
/// tables (`moonwire defs --options`, held against docs/scripting.md by a test) and
/// the flags' names and help come from here.
///
/// A new option is one entry of ``OptionDeclarations/all``; an option both roles take is one
/// entry with a `connect` and a `listen` use.
public struct SessionOption: @unchecked Sendable {
    // @unchecked: the closures are pure functions of their arguments.

    /// Who takes an option.
    public enum Role: String, Sendable, CaseIterable {
        case connect, listen
        /// The Lua function's name, for docs.
        var function: String { "mw.\(rawValue)" }
    }

    /// One role's use of the option: its doc line, default and where the value goes.
    public struct Use<Target> {
        /// The docs' "meaning" cell (Markdown).
        public let doc: String
        /// The docs' "default" cell (Markdown).
        public let defaultText: String
        /// Stores the value read (nil: the prelude handles the option; Swift never sees it).
        let apply: ((inout Target, OptionValue, inout LuaOptionTable) throws(LuaArgumentError) -> Void)?
    }

    /// A `connect` or `listen` flag that sets this option (or one of its fields).
    public struct Flag: Sendable {
        /// The long name, without `--`.
        public let name: String
        /// A one-letter name, if any.
        public let short: Character?
        /// Which commands have the flag.
        public let commands: [Role]
        /// The field set, as the script would write it (`tls.ca`).
        public let path: String
        /// `--help`'s line and the value's name (nil: a flag without a value).
        public let help: String
        public let valueName: String?
    }

    /// The key in `opts`.
    public let name: String
    /// The value's type and range.
    let type: OptionType
    let connect: Use<ConnectOptions>?
    let listen: Use<ListenOptions>?
    /// The flags of the commands that set it.
    public let flags: [Flag]
    /// A table option's fields (`reconnect.initial`), for the docs; empty for the others.
    public var fields: [FieldDoc] = []

    /// A field of a table option as the docs show it (``OptionField`` declares it).
    public struct FieldDoc: Sendable {
        public let name: String
        public let typeText: String
        /// The type as lua-language-server writes it.
        public let luaType: String
        public let doc: String
        public let defaultText: String
    }

    /// The roles that take it.
    public var roles: [Role] {
        [connect.map { _ in Role.connect }, listen.map { _ in Role.listen }].compactMap { $0 }
    }

    /// The docs' type cell: the type and its range.
    public var typeText: String { type.docText }

    /// The doc and default for `role`, if it takes the option.
    public func doc(for role: Role) -> (doc: String, defaultText: String)? {
        switch role {
        case .connect: connect.map { ($0.doc, $0.defaultText) }
        case .listen: listen.map { ($0.doc, $0.defaultText) }
        }
    }
}

/// How an option's value is read (and named in errors and docs).
enum OptionType {
    /// A number of seconds, 0 to 1e9.
    case seconds
    /// A whole number of at least `min`.
    case integer(min: Int)
    /// A whole number of at least 1 (a queue's limit).
    case count
    /// Any number (`math.huge` included); the field's own check says which.
    case number(String)
    /// An integer or a list of integers.
    case integers
    case boolean
    case string
    /// One of these strings.
    case choice([String])
    /// A string or a list of strings.
    case strings
    /// A table of names to strings (headers).
    case stringMap
    /// Read by the option's own parser (a table of fields, or several shapes); the text
    /// names it in the docs, `lua` in the editors' definitions.
    case custom(String, lua: String)

    /// What an error says was expected: `number`, `"open" or "manual"`, ...
    var expected: String {
        switch self {
        case .seconds: "number"
        case .integer(let min): "integer of at least \(min)"
        case .count: "a positive number"
        case .number: "number"
        case .integers: "list of integers"
        case .boolean: "boolean"
        case .string: "string"
        case .choice(let names): LuaOptionTable.alternatives(names)
        case .strings: "list of strings"
        case .stringMap: "table"
        case .custom(let text, _): text.replacingOccurrences(of: "`", with: "")
        }
    }

    var docText: String {
        switch self {
        case .seconds: "seconds (0 to 1e9)"
        case .integer(let min): "integer ≥ \(min)"
        case .count: "integer ≥ 1"
        case .number(let range): range
        case .integers: "integer or list of integers"
        case .boolean: "boolean"
        case .string: "string"
        case .choice(let names): names.map { "`\"\($0)\"`" }.joined(separator: " \\| ")
        case .strings: "string or list of strings"
        case .stringMap: "table of strings"
        case .custom(let text, _): text
        }
    }

    /// The type as lua-language-server writes it (`number`, `"a"|"b"`, `mw.Queue`).
    var luaType: String {
        switch self {
        case .seconds, .number: "number"
        case .integer, .count: "integer"
        case .boolean: "boolean"
        case .string: "string"
        case .choice(let names): names.map { "\"\($0)\"" }.joined(separator: "|")
        case .strings: "string|string[]"
        case .integers: "integer|integer[]"
        case .stringMap: "table<string, string>"
        case .custom(_, let lua): lua
        }
    }

    /// Reads `key` of `t` as this type: nil when absent; misuse names the option, what was
    /// expected and what came.
    func read(_ key: String, from t: inout LuaOptionTable) throws(LuaArgumentError) -> OptionValue? {
        switch self {
        case .seconds: return try t.seconds(key).map(OptionValue.number)
        case .integer(let min): return try t.integer(key, min: min).map(OptionValue.integer)
        case .count: return try t.count(key).map(OptionValue.integer)
        case .number: return try t.number(key).map(OptionValue.number)
        case .integers: return try t.integers(key).map(OptionValue.integers)
        case .boolean: return try t.boolean(key).map(OptionValue.boolean)
        case .string: return try t.string(key).map(OptionValue.string)
        case .choice(let names): return try t.choice(key, names).map(OptionValue.string)
        case .strings: return try t.strings(key).map(OptionValue.strings)
        case .stringMap: return try t.stringMap(key).map(OptionValue.stringMap)
        case .custom:
            let raw = t.raw(key)
            if case .nil = raw { return nil }
            return .raw(raw)
        }
    }
}

/// A value read by its ``OptionType``; the accessors hold because the declaration
/// chose the type.
enum OptionValue {
    case number(Double), integer(Int), boolean(Bool), string(String), strings([String]), integers([Int]), stringMap([(String, String)]), raw(LuaValue)

    /// Any number (``seconds`` is one in seconds).
    var double: Double {
        guard case .number(let d) = self else { preconditionFailure("not a number: \(self)") }
        return d
    }
    var ints: [Int] {
        guard case .integers(let l) = self else { preconditionFailure("not integers: \(self)") }
        return l
    }

    var seconds: TimeAmount { .seconds(double) }
    var int: Int {
        guard case .integer(let n) = self else { preconditionFailure("not an integer: \(self)") }
        return n
    }
    var bool: Bool {
        guard case .boolean(let b) = self else { preconditionFailure("not a boolean: \(self)") }
        return b
    }
    var text: String {
        guard case .string(let s) = self else { preconditionFailure("not a string: \(self)") }
        return s
    }
    var list: [String] {
        guard case .strings(let l) = self else { preconditionFailure("not strings: \(self)") }
        return l
    }
    var map: [(String, String)] {
        guard case .stringMap(let m) = self else { preconditionFailure("not a map: \(self)") }
        return m
    }
}

extension LuaOptionTable {
    /// One of `names`, else `"a", "b" or "c" expected, got "x"` (or `got number`).
    mutating func choice(_ key: String, _ names: [String]) throws(LuaArgumentError) -> String? {
        let value = raw(key)
        switch value {
        case .nil: return nil
        case .string(let bytes) where names.contains(String(decoding: bytes, as: UTF8.self)):
            return String(decoding: bytes, as: UTF8.self)
        case .string(let bytes): throw error(key, "\(Self.alternatives(names)) expected, got \"\(String(decoding: bytes, as: UTF8.self))\"")
        default: throw error(key, "\(Self.alternatives(names)) expected, got \(value.typeName)")
        }
    }

    /// `"a", "b" or "c"`.
    static func alternatives(_ names: [String]) -> String {
        let quoted = names.map { "\"\($0)\"" }
        return quoted.count < 2 ? quoted.joined() : quoted.dropLast().joined(separator: ", ") + " or " + quoted[quoted.count - 1]
    }
}

/// A field of a table option (`reconnect.initial`, `queue.limit`, `tls.ca`), declared
/// once like the options themselves: its name, type, doc line and default, and where its
/// value goes. The option's parser reads its table through its fields
/// (``read(_:from:into:)``), and the docs' table of the fields comes from them
/// (``SessionOption/fields``).
struct OptionField<Target> {
    let name: String
    let type: OptionType
    let doc: String
    let defaultText: String
    /// Stores the value read; throws (through the table, naming the field) what its type
    /// alone does not check.
    let apply: (inout Target, OptionValue, inout LuaOptionTable) throws(LuaArgumentError) -> Void

    init(_ name: String, _ type: OptionType, doc: String, defaultText: String,
         apply: @escaping (inout Target, OptionValue, inout LuaOptionTable) throws(LuaArgumentError) -> Void) {
        (self.name, self.type, self.doc, self.defaultText, self.apply) = (name, type, doc, defaultText, apply)
    }

    var fieldDoc: SessionOption.FieldDoc { .init(name: name, typeText: type.docText, luaType: type.luaType, doc: doc, defaultText: defaultText) }

    /// Reads each of `fields` from `t` into `target`, then refuses any other key.
    static func read(_ fields: [OptionField], from t: inout LuaOptionTable, into target: inout Target) throws(LuaArgumentError) {
        for field in fields {
            guard let value = try field.type.read(field.name, from: &t) else { continue }
            try field.apply(&target, value, &t)
        }
        try t.finish()
    }
}

extension Array {
    /// The docs of a table option's fields.
    func docs<Target>() -> [SessionOption.FieldDoc] where Element == OptionField<Target> { map(\.fieldDoc) }

    /// `{ a, b, c }`: the fields' names, as the options table shows a table option.
    func shape<Target>() -> String where Element == OptionField<Target> { "`{ " + map(\.name).joined(separator: ", ") + " }`" }
}

/// The table of declarations, in the docs' order.
public enum OptionDeclarations {
    typealias Connect = SessionOption.Use<ConnectOptions>
    typealias Listen = SessionOption.Use<ListenOptions>
    typealias Flag = SessionOption.Flag

    /// Every option of `mw.connect` and `mw.listen`.
    public static let all: [SessionOption] = [
        SessionOption(
            name: "headers", type: .stringMap,
            connect: Connect(doc: "extra handshake headers `{ Name = \"value\" }` (WebSocket)", defaultText: "{}") { o, v, t throws(LuaArgumentError) in
                try o.webSocketOnly("headers", &t)
                o.socket.headers = v.map
            },
            listen: nil,
            flags: [Flag(name: "header", short: "H", commands: [.connect], path: "headers", help: "A header 'Name: value' (repeatable).", valueName: "header")]
        ),
        SessionOption(
            name: "protocols", type: .strings,
            connect: Connect(doc: "subprotocols to offer (WebSocket)", defaultText: "{}") { o, v, t throws(LuaArgumentError) in
                try o.webSocketOnly("protocols", &t)
                o.socket.protocols = v.list
            },
            listen: Listen(doc: "subprotocols it accepts (WebSocket); the client's first acceptable choice wins", defaultText: "{}") { o, v, _ in
                o.server.protocols = v.list
            },
            flags: [Flag(name: "subprotocol", short: "s", commands: [.connect, .listen], path: "protocols", help: "A subprotocol to offer or accept (repeatable).", valueName: "sub")]
        ),
        SessionOption(
            name: "connect_timeout", type: .seconds,
            connect: Connect(doc: "seconds for TCP + TLS + handshake", defaultText: "10") { o, v, _ in o.dial.connectTimeout = v.seconds },
            listen: nil, flags: []
        ),
        SessionOption(
            name: "max_message", type: .integer(min: 1),
            connect: Connect(doc: "bytes; a larger incoming message closes with 1009 (TCP: the longest line)", defaultText: "16 MiB") { o, v, _ in
                o.maxMessage = v.int
            },
            listen: Listen(doc: "bytes; a larger incoming WebSocket message closes with 1009", defaultText: "16 MiB") { o, v, _ in
                o.server.maxMessage = v.int
            },
            flags: [Flag(name: "max-message", short: nil, commands: [.connect, .listen], path: "max_message", help: "Largest message accepted, such as 16M.", valueName: "bytes")]
        ),
        SessionOption(
            name: "close_timeout", type: .seconds,
            connect: Connect(doc: "seconds to wait for the peer's close frame after ours", defaultText: "5") { o, v, _ in o.dial.closeTimeout = v.seconds },
            listen: Listen(doc: "seconds to wait for a peer's close frame after ours (TCP: for writes to drain)", defaultText: "5") { o, v, _ in
                o.server.closeTimeout = v.seconds
            },
            flags: []
        ),
        SessionOption(
            name: "handshake_timeout", type: .seconds, connect: nil,
            listen: Listen(
                doc: "seconds a WebSocket client has, from the TCP accept, to finish TLS and send its upgrade request; slower ones are dropped unanswered",
                defaultText: "10"
            ) { o, v, _ in o.server.handshakeTimeout = v.seconds },
            flags: []
        ),
        SessionOption(
            name: "backlog", type: .integer(min: 1), connect: nil,
            listen: Listen(
                doc: "how many connections the kernel may hold queued before they are accepted, so that thousands of clients reconnecting at once after a restart wait instead of being turned away",
                defaultText: "the system's maximum, `net.core.somaxconn` (4096 on Debian 12)"
            ) { o, v, _ in o.server.backlog = Int32(clamping: v.int) },
            flags: []
        ),
        SessionOption(
            name: "compress", type: .boolean,
            connect: Connect(doc: "offer permessage-deflate (WebSocket)", defaultText: "false") { o, v, t throws(LuaArgumentError) in
                try o.webSocketOnly("compress", &t)
                o.socket.compress = v.bool
            },
            listen: Listen(doc: "accept permessage-deflate (WebSocket)", defaultText: "false") { o, v, _ in o.server.compress = v.bool },
            flags: [Flag(name: "compress", short: nil, commands: [.connect, .listen], path: "compress", help: "Offer or accept permessage-deflate compression.", valueName: nil)]
        ),
        SessionOption(
            name: "tls", type: .custom("table", lua: "mw.Tls"),
            connect: Connect(doc: "\(TLSOption.fields.shape()); see *TLS fields*", defaultText: "system trust") { o, _, t throws(LuaArgumentError) in
                if let tls = try TLSOption.parse(&t) { o.dial.tls = tls }
            },
            listen: Listen(doc: "`{ cert, key, ca }` for `wss://` and `tls://`: `cert` and `key` required; `ca` makes client certificates mandatory; see *TLS fields*", defaultText: "none") { o, _, t throws(LuaArgumentError) in
                if let tls = try TLSOption.parse(&t) { o.server.tls = tls }
            },
            flags: [
                Flag(name: "ca", short: nil, commands: [.connect], path: "tls.ca", help: "Trust the CAs in this PEM file.", valueName: "file"),
                Flag(name: "insecure", short: "k", commands: [.connect], path: "tls.insecure", help: "Skip certificate verification.", valueName: nil),
                Flag(name: "tls-cert", short: nil, commands: [.listen], path: "tls.cert", help: "The server's PEM certificate (chain), for wss:// and tls://.", valueName: "file"),
                Flag(name: "tls-key", short: nil, commands: [.listen], path: "tls.key", help: "The certificate's PEM private key.", valueName: "file"),
            ],
            fields: TLSOption.fields.docs()
        ),
        SessionOption(
            name: "proxy", type: .custom("string or `false`", lua: "string|false"),
            connect: Connect(
                doc: "`\"http://[user:pass@]host:port\"` (HTTP CONNECT) or `\"socks5://host:port\"`; `false`: no proxy, whatever the environment says; see *Proxies*",
                defaultText: "from the environment"
            ) { o, _, t throws(LuaArgumentError) in
                if let proxy = try ProxyOption.parse(&t) { o.dial.proxy = proxy }
            },
            listen: nil,
            flags: [Flag(name: "proxy", short: nil, commands: [.connect], path: "proxy", help: "An http:// or socks5:// proxy, or none.", valueName: "url")]
        ),
        SessionOption(
            name: "heartbeat", type: .custom("table or `false`", lua: "mw.Heartbeat|false"),
            connect: Connect(
                doc: "\(HeartbeatOption.fields.shape()), or `false`; see *Heartbeats*",
                defaultText: "`{ interval = 30, timeout = 10 }` (off for TCP)"
            ) { o, _, t throws(LuaArgumentError) in
                guard let heartbeat = try HeartbeatOption.parse(&t, role: .connect, webSocket: !o.isTCP) else { return }
                o.configuration.heartbeat = heartbeat.value
            },
            listen: Listen(
                doc: "`{ interval, timeout }`, or `false`: a peer silent for `interval` is probed (WebSocket peers get a ping) and dropped with 1006 when still silent `timeout` later (a TCP peer: after `interval + timeout` of silence). With `timeout` alone, a peer silent for longer is dropped and WebSocket peers are pinged halfway, so an idle client that answers pings stays. A server heartbeat has no `message`",
                defaultText: "none (`timeout`: 10)"
            ) { o, _, t throws(LuaArgumentError) in
                guard let heartbeat = try HeartbeatOption.parse(&t, role: .listen, webSocket: o.webSocket) else { return }
                o.server.heartbeat = heartbeat.value
            },
            flags: [Flag(name: "heartbeat", short: nil, commands: [.connect], path: "heartbeat.interval", help: "Ping after this much silence.", valueName: "seconds")],
            fields: HeartbeatOption.fields.docs()
        ),
        SessionOption(
            name: "ready", type: .choice(["open", "manual"]),
            connect: Connect(
                doc: "`\"open\"`: what was queued goes out when the socket opens; `\"manual\"`: it waits for `c:ready()` (see *Application handshakes*)",
                defaultText: "`\"open\"`"
            ) { o, v, _ in o.configuration.manualReady = v.text == "manual" },
            listen: nil, flags: []
        ),
        SessionOption(
            name: "auto_reply", type: .custom("table", lua: "mw.AutoReplyRule|mw.AutoReplyRule[]"),
            connect: Connect(
                doc: "answers to the peer's own pings: `{ match =, reply = }` or a list of them; see *Answering the peer's pings*", defaultText: "none"
            ) { o, v, _ in o.configuration.autoReply = AutoReplyOption.rules(v) },
            listen: Listen(doc: "the peers' pings answered for the script, as for `mw.connect`", defaultText: "none") { o, v, _ in
                o.server.autoReply = AutoReplyOption.rules(v)
            },
            flags: [Flag(name: "auto-reply", short: nil, commands: [.connect], path: "auto_reply", help: "Answer pings: a rule MATCH=REPLY (Socket.IO: 2=3).", valueName: "rule")]
        ),
        SessionOption(
            name: "kind", type: .choice(["auto", "text", "binary"]),
            connect: Connect(
                doc: "what `c:send(data)` uses without a kind: `\"auto\"` (valid UTF-8 as text, else binary), `\"text\"` or `\"binary\"`", defaultText: "`\"auto\"`"
            ) { _, _, _ in },  // checked here, kept by the prelude

            listen: nil, flags: []
        ),
        SessionOption(
            name: "reconnect", type: .custom("table or `false`", lua: "mw.Reconnect|false"),
            connect: Connect(
                doc: "\(ReconnectOption.fields.shape()), or `false`; see *Reconnecting*",
                defaultText: "`{ initial = 1, factor = 2, max = 30, jitter = 0.2, attempts = 10 }`"
            ) { o, _, t throws(LuaArgumentError) in
                if let reconnect = try ReconnectOption.parse(&t) { o.configuration.reconnect = reconnect.value }
            },
            listen: nil,
            flags: [Flag(name: "reconnect", short: nil, commands: [.connect], path: "reconnect", help: "Reconnect with backoff when it is lost.", valueName: nil)],
            fields: ReconnectOption.fields.docs()
        ),
        SessionOption(
            name: "queue", type: .custom("table", lua: "mw.Queue"),
            connect: Connect(
                doc: "the send budget: \(QueueOption.fields.shape()), see [Send budget](#send-budget-slow-peers-and-drain)",
                defaultText: "`{ limit = 1024, bytes = 16 MiB, overflow = \"error\" }`"
            ) { o, _, t throws(LuaArgumentError) in
                if let queue = try QueueOption.parse(&t) { (o.configuration.queueLimit, o.configuration.queueBytes, o.configuration.overflow) = queue }
            },
            listen: Listen(doc: "each peer's send budget, as for `mw.connect`", defaultText: "as for `mw.connect`") { o, _, t throws(LuaArgumentError) in
                if let queue = try QueueOption.parse(&t) { (o.server.queueLimit, o.server.queueBytes, o.server.overflow) = queue }
            },
            flags: [],
            fields: QueueOption.fields.docs()
        ),
        SessionOption(
            name: "slow_peer", type: .choice(MessageServerOptions.SlowPeer.allCases.map(\.rawValue)), connect: nil,
            listen: Listen(doc: "what a broadcast does to a peer whose budget is full: it misses the message, or is closed with 1008 (see *Send budget*)", defaultText: "`\"drop\"`") {
                o, v, _ in o.server.slowPeer = MessageServerOptions.SlowPeer(rawValue: v.text) ?? .drop
            },
            flags: []
        ),
        SessionOption(
            name: "framing", type: .custom("string, table or (`mw.connect` only) function", lua: "\"line\"|\"raw\"|table|fun(buffer: string): string?, integer?"),
            connect: Connect(
                doc: "TCP: \(LuaFraming.syntax), or `fn(buffer) -> message, consumed \\| nil`; WebSocket: the function only, see *Several messages in one WebSocket message*",
                defaultText: "`\"line\"` (TCP), none (WebSocket)"
            ) { o, _, t throws(LuaArgumentError) in try o.framing(&t) },
            listen: Listen(doc: "TCP: \(LuaFraming.syntax) (no function)", defaultText: "`\"line\"`") { o, _, t throws(LuaArgumentError) in
                if let framing = try LuaFraming.parse(&t, custom: nil) { o.server.framing = framing }
            },
            flags: [Flag(name: "framing", short: nil, commands: [.connect, .listen], path: "framing", help: "tcp/tls: \(LuaFraming.flagSyntax) (default line).", valueName: "framing")]
        ),
        SessionOption(
            name: "codec", type: .custom("string or table", lua: "\"json\"|\"msgpack\"|\"cbor\"|mw.Codec"),
            connect: Connect(
                doc: "`\"json\"` (the native `mw.json`, see *The JSON codec*), `\"msgpack\"` or `\"cbor\"` (the native `mw.msgpack` / `mw.cbor`, docs/formats.md), or `{ encode = fn, decode = fn }` applied to every send / message",
                defaultText: "none"
            ) { o, _, t throws(LuaArgumentError) in o.codec = try NativeCodec(&t) },
            listen: Listen(doc: "as for `mw.connect`", defaultText: "none") { o, _, t throws(LuaArgumentError) in o.codec = try NativeCodec(&t) },
            flags: []
        ),
        SessionOption(
            name: "record", type: .string,
            connect: Connect(doc: "a file to record the connection's events to, as JSON Lines ([recording.md](recording.md))", defaultText: "none") { o, v, _ in
                o.record = v.text
            },
            listen: nil, flags: []
        ),
        SessionOption(
            name: "record_secrets", type: .boolean,
            connect: Connect(doc: "with `record`: keep Authorization/Cookie/token headers in the file", defaultText: "false") { o, v, _ in
                o.recordSecrets = v.bool
            },
            listen: nil, flags: []
        ),
    ]

    /// Argument `n`, the `opts` of `role`, copied into Swift. A value that cannot be copied
    /// (a function where the prelude has not taken it out) is refused naming the option,
    /// what it takes and what it got.
    static func copy(_ args: LuaArguments, _ n: Int32, role: SessionOption.Role) throws(LuaArgumentError) -> LuaValue {
        do {
            return try args.lua.value(at: args.index(n))
        } catch {
            guard let type = error.typeName, let first = error.keys.first else { throw args.error(n, error.description) }
            if error.keys.count == 1, let option = named(first), option.roles.contains(role) {
                throw args.error(n, "opts.\(error.path): \(option.type.expected) expected, got \(type)")
            }
            throw args.error(n, "opts.\(error.path): a \(type) is not a value this option takes")
        }
    }

    /// The declaration named `name`.
    public static func named(_ name: String) -> SessionOption? { all.first { $0.name == name } }

    /// The flag `--name` of `command`, declared with its option.
    public static func flag(_ name: String, of command: SessionOption.Role) -> SessionOption.Flag {
        guard let flag = all.lazy.flatMap(\.flags).first(where: { $0.name == name && $0.commands.contains(command) }) else {
            preconditionFailure("no option declares --\(name) for \(command)")
        }
        return flag
    }

    /// Reads `opts` into `target` for the role whose uses `role` picks (`\.connect`,
    /// `\.listen`): each declared option of the role by its type, then the rest refused
    /// as unknown.
    static func parse<Target>(_ t: inout LuaOptionTable, _ role: KeyPath<SessionOption, SessionOption.Use<Target>?>, into target: inout Target) throws(LuaArgumentError) {
        for option in all {
            guard let apply = option[keyPath: role]?.apply, let value = try option.type.read(option.name, from: &t) else { continue }
            try apply(&target, value, &t)
        }
        try t.finish()
    }

    /// The Markdown table of `role`'s options, as docs/scripting.md has it between
    /// `<!-- options: mw.connect -->` and `<!-- /options -->`.
    public static func markdownTable(for role: SessionOption.Role) -> String {
        var lines = ["| option | type | meaning | default |", "|---|---|---|---|"]
        for option in all {
            guard let use = option.doc(for: role) else { continue }
            lines.append("| `\(option.name)` | \(option.typeText) | \(use.doc) | \(use.defaultText) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The Markdown table of a table option's fields (`reconnect`).
    public static func markdownTable(fieldsOf option: SessionOption) -> String {
        var lines = ["| field | type | meaning | default |", "|---|---|---|---|"]
        for field in option.fields {
            lines.append("| `\(field.name)` | \(field.typeText) | \(field.doc) | \(field.defaultText) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Every role's table and every table option's fields, with their markers
    /// (`<!-- options: mw.connect -->`, `<!-- options: reconnect -->`): what
    /// `moonwire defs --options` prints.
    public static func markdownTables() -> String {
        let roles = SessionOption.Role.allCases.map { role in
            "<!-- options: \(role.function) -->\n" + markdownTable(for: role) + "<!-- /options -->\n"
        }
        let fields = all.filter { !$0.fields.isEmpty }.map { option in
            "<!-- options: \(option.name) -->\n" + markdownTable(fieldsOf: option) + "<!-- /options -->\n"
        }
        return (roles + fields).joined(separator: "\n")
    }

    /// The lua-language-server classes of the options (`mw.ConnectOptions`,
    /// `mw.ListenOptions`) and of the table options' fields (`mw.Reconnect`), as the
    /// definition file `moonwire init` writes has them.
    public static func luaClasses() -> String {
        func line(_ name: String, _ type: String, _ doc: String) -> String {
            "---@field \(name)? \(type) \(doc.replacingOccurrences(of: "\n", with: " "))"
        }
        var out: [String] = []
        for option in all where !option.fields.isEmpty {
            guard case .custom(_, let lua) = option.type, let name = lua.split(separator: "|").first else { continue }
            out.append("---@class \(name)")
            out += option.fields.map { line($0.name, $0.luaType, $0.doc) }
            out.append("")
        }
        for (role, name) in [(SessionOption.Role.connect, "mw.ConnectOptions"), (.listen, "mw.ListenOptions")] {
            out.append("---@class \(name)")
            out += all.compactMap { option in option.doc(for: role).map { line(option.name, option.type.luaType, $0.doc) } }
            out.append("")
        }
        return out.joined(separator: "\n")
    }

    /// `connect --max-message max_message` lines: every declared flag and what it sets.
    public static func flagList() -> String {
        all.flatMap { option in option.flags.flatMap { flag in flag.commands.map { "\($0.rawValue) --\(flag.name) \(flag.path)\n" } } }.joined()
    }
}
