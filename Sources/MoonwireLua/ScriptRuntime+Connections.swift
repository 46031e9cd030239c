import CLua
import CLuaShim
import MoonwireCore
import NIOCore

/// `mw.connect` and the connection methods implemented in Swift; the prelude
/// adds the Lua ones (on_*, receive, wait_open, request, the codec).
extension ScriptRuntime {
    /// The prelude's connection event dispatchers.
    enum ConnectionEvent: String, CaseIterable {
        case open, message, close, error
    }

    static let connectionMethods: [(String, mw_swift_fn)] = [
        ("send", { L, ctx in
            LuaBinding.enter(L, ctx, "c:send", isMethod: true, wrapped: true, as: ScriptRuntime.self) { rt, args in
                try rt.send(args)
            }
        }),
        ("ping", { L, ctx in
            LuaBinding.enter(L, ctx, "c:ping", isMethod: true, as: ScriptRuntime.self) { rt, args in
                let c = try rt.connection(args)
                let payload = args.isNoneOrNil(2) ? [] : try args.bytes(2)
                guard payload.count <= 125 else { throw args.error(2, "a ping payload is at most 125 bytes") }
                if c.connection.ping(ByteBuffer(bytes: payload)) {
                    args.lua.push(true)
                    return 1
                }
                args.lua.pushNil()
                args.lua.push("not open")
                return 2
            }
        }),
        ("close", { L, ctx in
            LuaBinding.enter(L, ctx, "c:close", isMethod: true, as: ScriptRuntime.self) { rt, args in
                let c = try rt.connection(args)
                let code = try args.optionalInteger(2) ?? 1000
                guard (0...4999).contains(code), WebSocketCloseCode.isValidOnWire(UInt16(code)) else {
                    throw args.error(2, "close code \(code) may not be sent (1000 to 1003, 1007 to 1014, or 3000 to 4999)")
                }
                let reason = args.isNoneOrNil(3) ? "" : try args.string(3)
                guard reason.utf8.count <= 123 else { throw args.error(3, "a close reason is at most 123 bytes") }
                args.lua.push(c.connection.close(code: UInt16(code), reason: reason))
                return 1
            }
        }),
        ("state", { L, ctx in
            LuaBinding.enter(L, ctx, "c:state", isMethod: true, as: ScriptRuntime.self) { rt, args in
                args.lua.push(try rt.connection(args).connection.state)
                return 1
            }
        }),
        ("stats", { L, ctx in
            LuaBinding.enter(L, ctx, "c:stats", isMethod: true, as: ScriptRuntime.self) { rt, args in
                let s = try rt.connection(args).connection.stats
                var table: [LuaValue: LuaValue] = [
                    .text("sent"): .integer(Int64(s.sent)), .text("received"): .integer(Int64(s.received)),
                    .text("bytes_sent"): .integer(Int64(s.bytesSent)), .text("bytes_received"): .integer(Int64(s.bytesReceived)),
                    .text("reconnects"): .integer(Int64(s.reconnects)), .text("queued"): .integer(Int64(s.queued)),
                    .text("dropped"): .integer(Int64(s.dropped)),
                ]
                if let rtt = s.lastRTT { table[.text("last_rtt")] = .number(rtt) }
                args.lua.push(LuaValue.table(table))
                return 1
            }
        }),
    ]

    func connection(_ args: LuaArguments) throws(LuaArgumentError) -> LuaConnection {
        guard let c = args.lua.object(at: 1, class: LuaConnection.className, as: LuaConnection.self) else {
            throw args.typeError(1, expected: "connection")
        }
        return c
    }

    /// `host.connect(url, opts)`: the prelude has taken out the codec.
    func connect(_ args: LuaArguments) throws -> Int32 {
        let text = try args.string(1)
        let url: WebSocketURL
        do {
            url = try WebSocketURL(text)
        } catch {
            throw args.error(1, error.description)
        }
        let opts: LuaValue
        do {
            opts = try args.lua.value(at: 2)
        } catch {
            throw args.error(2, error.description)
        }
        let parsed = try ConnectOptions(opts, function: "mw.connect")
        let managed = ManagedConnection(url: url, options: parsed.socket, eventLoop: eventLoop)
        managed.queueLimit = parsed.queueLimit
        let c = LuaConnection(runtime: self, connection: managed)
        managed.delegate = c
        args.lua.push(object: c, class: LuaConnection.className)
        args.lua.pushValue(-1)
        c.handle = args.lua.reference()
        connections[ObjectIdentifier(c)] = c
        // Dial on the next loop turn, so handlers set right after mw.connect see every event.
        eventLoop.execute { managed.start() }
        return 1
    }

    private func send(_ args: LuaArguments) throws -> Int32 {
        let c = try connection(args)
        let kindName = args.isNoneOrNil(3) ? nil : try args.string(3)
        let (buffer, kind) = try args.withBytes(2) { bytes throws(LuaArgumentError) -> (ByteBuffer, WebSocketMessageKind) in
            var validator = UTF8Validator()
            let isText = validator.feed(bytes) && validator.isComplete
            let kind: WebSocketMessageKind
            switch kindName {
            case nil: kind = isText ? .text : .binary
            case "text"?:
                guard isText else { throw args.error(2, "not valid UTF-8: send it as \"binary\"") }
                kind = .text
            case "binary"?: kind = .binary
            case let other?: throw args.error(3, "\"text\" or \"binary\" expected, got \"\(other)\"")
            }
            return (ByteBuffer(bytes: bytes), kind)
        }
        switch c.connection.send(buffer, kind: kind) {
        case .sent, .queued:
            args.lua.push(true)
            return 1
        case .queueFull:
            args.lua.pushNil()
            args.lua.push("queue full (\(c.connection.queueLimit) messages waiting for the connection to open)")
            return 2
        case .closed:
            args.lua.pushNil()
            args.lua.push("closed")
            return 2
        }
    }

    /// Calls the prelude's dispatcher for `event` with the connection and what `push` pushes.
    func dispatch(_ event: ConnectionEvent, for c: LuaConnection, push: (LuaState) -> Int32) {
        guard let dispatcher = connectionEvents[event], let handle = c.handle, !finished else { return }
        lua.push(dispatcher)
        lua.push(handle)
        let n = push(lua)
        callIntoLua(arguments: 1 + n)
    }

    /// The connection is closed for good: it no longer keeps the script alive,
    /// and its userdata may be collected once the script drops it.
    func connectionEnded(_ c: LuaConnection) {
        connections[ObjectIdentifier(c)] = nil
        if let handle = c.handle { lua.release(handle) }
        c.handle = nil
        if let code = shutdownCode, connections.isEmpty { finish(code) }
        if !finished && !isAlive { finish(0) }
    }
}

/// The `opts` of `mw.connect`, checked.
struct ConnectOptions {
    var socket = WebSocketClientOptions()
    var queueLimit = 1024
    /// `false`, or the keys given (defaults apply to the rest).
    var heartbeat: LuaOptionTable?
    var reconnect: LuaOptionTable?

    /// A policy option: `false` turns it off (nil here), a table is checked for unknown keys.
    private static func policy(_ t: inout LuaOptionTable, _ key: String, keys: [String]) throws(LuaArgumentError) -> LuaOptionTable? {
        if case .boolean(false) = t.raw(key) { return nil }
        guard var table = try t.table(key) else { return nil }
        for k in keys { _ = table.raw(k) }
        try table.finish()
        return table
    }

    init(_ value: LuaValue, function: String) throws(LuaArgumentError) {
        var t = try LuaOptionTable(value, function: function, argument: 2)
        if let headers = try t.stringMap("headers") { socket.headers = headers }
        if let protocols = try t.strings("protocols") { socket.protocols = protocols }
        if let s = try t.seconds("connect_timeout") { socket.connectTimeout = .nanoseconds(Int64(s * 1e9)) }
        if let s = try t.seconds("close_timeout") { socket.closeTimeout = .nanoseconds(Int64(s * 1e9)) }
        if let n = try t.integer("max_message", min: 1) { socket.maxMessage = n }
        if let b = try t.boolean("compress") { socket.compress = b }
        if var tls = try t.table("tls") {
            socket.tls.caFile = try tls.string("ca")
            socket.tls.insecure = try tls.boolean("insecure") ?? false
            socket.tls.pinSHA256 = try tls.strings("pin_sha256") ?? []
            socket.tls.serverName = try tls.string("server_name")
            socket.tls.certificateFile = try tls.string("cert")
            socket.tls.privateKeyFile = try tls.string("key")
            try tls.finish()
        }
        if var queue = try t.table("queue") {
            queueLimit = try queue.integer("limit", min: 0) ?? queueLimit
            if let overflow = try queue.string("overflow"), overflow != "error" {
                throw queue.error("overflow", "only \"error\" is supported so far")
            }
            try queue.finish()
        }
        if case .table = t.raw("framing") {
            throw t.error("framing", "framing is for tcp:// and tls:// connections")
        }
        heartbeat = try Self.policy(&t, "heartbeat", keys: ["interval", "timeout", "message", "reply"])
        reconnect = try Self.policy(&t, "reconnect", keys: ["initial", "factor", "max", "jitter", "attempts", "on_normal_close", "retry_http"])
        try t.finish()
    }
}
