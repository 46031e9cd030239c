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
                rt.reconnect(c, userdata: args)
                return 0
            }
            var holder = try LuaOptionTable(.table([.text("reconnect"): try args.lua.value(at: args.index(1))]), function: args.function, argument: 1, path: "")
            guard let setting = try ConnectOptions.reconnect(&holder) else { throw args.typeError(1, expected: "table or false") }
            c.connection.setReconnect(setting.value)
            return 0
        },
        LuaFunction("send_now", wrapped: true) { rt, args in
            try rt.withConnection(args) { c in
                try rt.sendOutcome(args.withMessage(at: 1, kindAt: 2, codec: c.codec) { c.connection.sendNow(bytes: $0, kind: $1) }, args, on: c, now: true)
            }
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

    /// `host.connect(url, opts[, schema, index])`: the prelude has taken out the codec (a
    /// protobuf codec comes as its schema and message index).
    func connect(_ args: LuaArguments) throws -> Int32 {
        let (text, url) = try endpoint(args, TransportURL.init)
        let opts = try OptionDeclarations.copy(args, 2, role: .connect)
        let framer = LuaFramer()
        var parsed = try ConnectOptions(opts, function: args.function, url: url, custom: framer.framing)
        let protobuf = try NativeCodec(protobufAt: 3, args)
        if let protobuf { parsed.codec = protobuf }
        parsed.configuration.sendBudget = sendBudget
        // Before the connection is made: from its making until it is closed, it is held
        // by its parts (ManagedConnection.drive), so nothing may throw in between.
        let recorder = try recorder(parsed, url: text, args: args)
        let managed = ManagedConnection(url: url, configuration: parsed.configuration, eventLoop: eventLoop)
        managed.logger = options.logger
        managed.recorder = recorder
        let c = LuaConnection(runtime: self, connection: managed, framer: framer, closeTimeout: parsed.closeTimeout, codec: parsed.codec)
        c.handle = args.lua.pushHandle(object: c, class: LuaConnection.className)
        if protobuf != nil { NativeCodec.keepSchema(at: 3, args) }
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

    /// A message from a session in either role, decoded by the session's native codec
    /// when it has one: straight to the session's route (its one `on_message` handler)
    /// when it has one, else to `events.message`, which also takes a message its codec
    /// could not decode.
    @inline(__always)
    func dispatchMessage(_ message: ByteBuffer, kind: MessageKind, for s: LuaSession) {
        guard let route = s.route, let handle = s.handle, !finished else {
            return dispatch(.message, for: s) { lua in lua.pushMessage(message, kind: kind, codec: s.codec) }
        }
        lua.push(route)
        lua.push(handle)
        let n = lua.pushMessage(message, kind: kind, codec: s.codec)
        if n != 2 {
            // Not decoded (the error and the raw message came with it): events.message
            // reports it, with what is pushed already, in the route's place.
            guard let dispatcher = connectionEvents[ConnectionEvent.message.rawValue] else { return lua.pop(n + 2) }
            lua.push(dispatcher)
            mw_replace(lua.L, -(n + 3))
        }
        callIntoLua(arguments: 1 + n)
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

    /// `c:reconnect()`: reconnects now; on a connection closed for good, brings it back to
    /// life. The handle is the script's own userdata (the method's self): the prelude keys
    /// its state by it.
    func reconnect(_ c: LuaConnection, userdata args: LuaArguments) {
        // Ended (connectionEnded let it go): linked again first, so that what the
        // reconnect reports at once reaches the connection.
        let ended = c.handle == nil
        if ended { c.attach(to: self) }
        c.connection.reconnectNow()
        guard ended else { return }
        guard c.connection.isAlive else { return c.detach() }
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
        c.releaseReferences(in: lua)
        c.detach()
        if let code = shutdownCode, connections.isEmpty { finish(code) }
        // Inside a call into Lua (a TCP c:close() ends its connection before it returns),
        // the script may still start a timer: the call's end decides (callIntoLua).
        if finished { connectionsEnded() } else if !isAlive && callDepth == 0 { finish(shutdownCode ?? 0) }
    }
}

/// A Lua framing function (the `framing` option) as a Core decoder: `fn(buffer) -> message,
/// consumed | nil`, called through the prelude with the bytes buffered so far.
final class LuaFramer {
    /// Set and cut with the connection's other links (``LuaConnection/detach()``): the
    /// framer is held by the connection's own decoder. The runtime is reached through the
    /// connection.
    var connection: LuaConnection?

    func framing() -> CustomFraming {
        // Held strongly by the decoder.
        CustomFraming { buffer in
            guard let connection = self.connection, let runtime = connection.runtime else { return nil }
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
            throw error(1, "close code \(code) may not be sent (\(CloseCode.sendableRangesText))")
        }
        let reason = isNoneOrNil(2) ? "" : try string(2)
        guard let close = try? WebSocketClose(code: code, reason: reason) else {
            throw error(2, "a close reason is at most \(WebSocketClose.maxReason) bytes")
        }
        return (close.code, close.reason)
    }
}
