import CLua
import MoonwireCore
import NIOCore

/// The methods a connection has in either role, declared once: `c:` (a client's,
/// ``connectionMethods``) and `peer:` (a server's, ``peerMethods``) both start from
/// ``sessionMethods``, and the prelude adds their Lua half once for both
/// (`prelude/sessions.lua`). A method added here is a method of both.
extension ScriptRuntime {
    /// Bound once per class, so that an error names what the script called (`c:send`,
    /// `peer:send`); `self` is either class (``session(_:)``).
    static let sessionMethods: [LuaFunction<ScriptRuntime>] = [
        LuaFunction("send", wrapped: true) { rt, args in
            // Per message: each role's send called on its own type, not through the
            // MessageSession protocol (a witness-table call the optimizer cannot inline),
            // and the message's bytes handed straight to it: a closure handed on through
            // another function was given its own reference to the session (a retain and
            // a release per message, on Swift's slow path while the session was weakly
            // referenced).
            try rt.withSession(
                args,
                connection: { c in
                    try rt.sendOutcome(args.withMessage(at: 1, kindAt: 2, codec: c.codec) { c.connection.send(bytes: $0, kind: $1) }, args, on: c, now: false)
                },
                peer: { p in
                    try rt.sendOutcome(args.withMessage(at: 1, kindAt: 2, codec: p.codec) { p.peer.send(bytes: $0, kind: $1) }, args, on: p, now: false)
                })
        },
        LuaFunction("ping") { rt, args in
            let s = try rt.session(args)
            guard s.session.supportsPing else {
                let hint = s is LuaConnection ? "; to probe it, give it a heartbeat message (opts.heartbeat = { message = \"ping\" })" : ""
                throw LuaArgumentError("\(args.function): a tcp:// or tls:// connection has no ping\(hint)")
            }
            let payload = args.isNoneOrNil(1) ? [] : try args.bytes(1)
            guard let ping = try? WebSocketPing(ByteBuffer(bytes: payload)) else {
                throw args.error(1, "a ping payload is at most \(WebSocketPing.maxPayload) bytes")
            }
            if s.session.ping(ping.payload) {
                args.lua.push(true)
                return 1
            }
            args.lua.pushNil()
            args.lua.push("not open")
            return 2
        },
        LuaFunction("close") { rt, args in
            let s = try rt.session(args)
            let (code, reason) = try args.closeCodeAndReason()
            // The code was checked: a close cannot refuse it.
            args.lua.push((try? s.session.close(code: code, reason: reason)) ?? 0)
            return 1
        },
        LuaFunction("stats") { rt, args in
            args.lua.push(ScriptRuntime.statsTable(try rt.session(args).session.sessionStats))
            return 1
        },
        // For the prelude's reroute (prelude/connections.lua): the function the session's
        // messages go straight to, or false for events.message. A session that ended
        // keeps none (its references went with it); nor does one whose userdata Lua has
        // finalized, which a weak table (a server's peers) lists until the next collection.
        LuaFunction("_route", shownAs: ":on_message") { rt, args in
            guard let s = rt.liveSession(args) else { return 0 }
            if let route = s.route { args.lua.release(route) }
            s.route = nil
            if s.handle != nil, args.lua.type(at: args.index(1)) == LUA_TFUNCTION {
                args.lua.pushValue(args.index(1))
                s.route = args.lua.reference()
            }
            return 0
        },
        // For the prelude's drain(): true while the budget is reached (drain waits).
        LuaFunction("_over_budget", shownAs: ":drain") { rt, args in
            args.lua.push(try rt.session(args).session.isOverBudget)
            return 1
        },
    ]

    /// `self` of a method both roles have: a connection or a peer.
    func session(_ args: LuaArguments) throws(LuaArgumentError) -> LuaSession {
        if let s = liveSession(args) { return s }
        return try args.object(class: LuaPeer.className, expected: args.function.hasPrefix("peer") ? "peer" : LuaConnection.typeName)
    }

    /// ``session(_:)``, or nil where that raises: `self` is no session, or one whose
    /// userdata Lua has finalized.
    func liveSession(_ args: LuaArguments) -> LuaSession? {
        args.lua.object(at: args.index(0), class: LuaConnection.className, as: LuaSession.self)
            ?? args.lua.object(at: args.index(0), class: LuaPeer.className, as: LuaSession.self)
    }

    /// ``session(_:)`` for the length of `body`, not retained: for the methods called per message.
    func withSession<R>(_ args: LuaArguments, _ body: (LuaSession) throws -> R) throws -> R {
        try withSession(args, connection: body, peer: body)
    }

    /// The same, with the role's own type: `connection` or `peer` runs, so that a call per
    /// message reaches its session's concrete type rather than the protocol.
    func withSession<R>(
        _ args: LuaArguments, connection: (LuaConnection) throws -> R, peer: (LuaPeer) throws -> R
    ) throws -> R {
        if let c = args.lua.unmanagedObject(at: args.index(0), class: LuaConnection.className, as: LuaConnection.self) {
            return try c._withUnsafeGuaranteedRef(connection)
        }
        let expected = args.function.hasPrefix("peer") ? "peer" : LuaConnection.typeName
        return try args.withObject(class: LuaPeer.className, expected: expected, as: LuaPeer.self, peer)
    }

    /// What `send` (and a client's `send_now`) returns to Lua for the outcome `sent` of
    /// sending argument 1 on `s`: `true`, or `nil, err`.
    func sendOutcome(_ sent: SendResult, _ args: LuaArguments, on s: LuaSession, now: Bool) throws -> Int32 {
        let refusal: String
        switch sent {
        case .sent, .queued:
            args.lua.push(true)
            return 1
        case .queueFull:
            if s is LuaConnection { metrics.registry.add(metrics.refused) }
            refusal = self.refusal("queue full", byProcessBudget: s.session.refusedByProcessBudget)
        case .tooLarge:
            if s is LuaConnection { metrics.registry.add(metrics.refused) }
            refusal = self.refusal("message too large", byProcessBudget: s.session.refusedByProcessBudget)
        case .closed:
            // Open, but the TCP framing cannot carry this message: misuse, at the caller's line.
            if s.session.isOpen, let reason = s.session.lastRefusal {
                throw args.error(1, reason)
            }
            refusal = now ? "not open" : "closed"
        }
        args.lua.pushNil()
        args.lua.push(refusal)
        return 2
    }

    /// `stats()` of either role: what only a client has (reconnects, the last dial's
    /// steps) is left out for a peer.
    static func statsTable(_ s: SessionStats) -> LuaValue {
        var table: [LuaValue: LuaValue] = [
            .text("sent"): .integer(Int64(s.sent)), .text("received"): .integer(Int64(s.received)),
            .text("bytes_sent"): .integer(Int64(s.bytesSent)), .text("bytes_received"): .integer(Int64(s.bytesReceived)),
            .text("queued"): .integer(Int64(s.queued)), .text("buffered"): .integer(Int64(s.buffered)),
            .text("dropped"): .integer(Int64(s.dropped)), .text("auto_replies"): .integer(Int64(s.autoReplies)),
        ]
        if let reconnects = s.reconnects { table[.text("reconnects")] = .integer(Int64(reconnects)) }
        if let rtt = s.lastRTT { table[.text("last_rtt")] = .number(rtt) }
        if let timing = s.connectTiming {
            // The last dial that opened, in seconds: { dns, tcp, tls?, handshake?, total }.
            var steps: [LuaValue: LuaValue] = [:]
            let named: [(String, TimeAmount?)] = [
                ("dns", timing.dns), ("tcp", timing.tcp), ("tls", timing.tls), ("handshake", timing.handshake), ("total", timing.total),
            ]
            for case let (name, amount?) in named { steps[.text(name)] = .number(RunMetrics.seconds(amount)) }
            table[.text("connect")] = .table(steps)
        }
        return .table(table)
    }
}
