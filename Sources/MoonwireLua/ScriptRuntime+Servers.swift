import Glibc
import CLua
import CMoonJSON
import CLuaShim
import MoonwireCore
import NIOCore

/// `mw.listen`, the server and peer methods implemented in Swift; the prelude
/// adds the handlers (on_connect, on_message, on_close) and the codec.
extension ScriptRuntime {
    /// Numbered like `ConnectionEvent`; the name is the prelude's. A peer's messages and
    /// drains go to the dispatchers of every session (``ConnectionEvent``).
    enum ServerEvent: Int, CaseIterable {
        case connect, close

        var name: String { "\(self)" }
    }

    static let serverMethods = LuaFunctions<ScriptRuntime>.methods(of: "s", [
        LuaFunction("url") { rt, args in
            args.lua.push(try rt.server(args).server.url.description)
            return 1
        },
        LuaFunction("broadcast", wrapped: true) { rt, args in
            let s = try rt.server(args)
            let (buffer, kind) = try args.message(at: 1, kindAt: 2, codec: s.codec)
            do {
                args.lua.push(try s.server.broadcast(buffer, kind: kind))
            } catch {
                throw args.error(1, "\(error)")
            }
            return 1
        },
        LuaFunction("peers") { rt, args in
            let s = try rt.server(args)
            let handles = s.server.peers.compactMap { s.peers[$0.id]?.handle }
            lua_createtable(args.lua.L, Int32(handles.count), 0)
            for (i, handle) in handles.enumerated() {
                args.lua.push(handle)
                lua_rawseti(args.lua.L, -2, lua_Integer(i + 1))
            }
            return 1
        },
        LuaFunction("reject_next") { rt, args in
            let s = try rt.server(args)
            let count = try args.integer(1)
            let status = try args.optionalInteger(2) ?? 503
            guard count >= 0 else { throw args.error(1, "a count of 0 or more expected") }
            guard (400...599).contains(status) else { throw args.error(2, "an HTTP status from 400 to 599 expected") }
            s.server.rejectNext(count, status: status)
            return 0
        },
        LuaFunction("close") { rt, args in
            rt.closeServer(try rt.server(args))
            return 0
        },
    ])

    /// The methods only a server's peer has; with ``sessionMethods``, those of `peer:`.
    static let peerMethods = LuaFunctions<ScriptRuntime>.methods(of: "peer", sessionMethods + [
        LuaFunction("abort") { rt, args in
            try rt.peer(args).peer.abort()
            return 0
        },
        LuaFunction("pause") { rt, args in
            let p = try rt.peer(args)
            let seconds = try args.number(1)
            guard seconds >= 0, seconds < 1e9 else { throw args.error(1, "seconds from 0 to 1e9 expected") }
            p.peer.pause(for: .seconds(seconds))
            return 0
        },
        LuaFunction("send_raw") { rt, args in
            let p = try rt.peer(args)
            p.peer.sendRaw(ByteBuffer(bytes: try args.bytes(1)))
            return 0
        },
        LuaFunction("_fields", shownAs: "peer") { rt, args in
            let p = try rt.peer(args)
            args.lua.push(p.peer.id)
            args.lua.push(p.peer.remoteAddress)
            return 2
        },
    ])

    func server(_ args: LuaArguments) throws(LuaArgumentError) -> LuaServer {
        try args.object(class: LuaServer.className, expected: "server")
    }

    func peer(_ args: LuaArguments) throws(LuaArgumentError) -> LuaPeer {
        try args.object(class: LuaPeer.className, expected: "peer")
    }

    /// `host.listen(url, opts[, schema, index])` → server | nil, err. The prelude has taken
    /// out the codec (a protobuf codec comes as its schema and message index) and a
    /// framing function.
    func listen(_ args: LuaArguments) throws -> Int32 {
        let url = try endpoint(args, ServerURL.init).url
        let opts = try OptionDeclarations.copy(args, 2, role: .listen)
        let parsed = try ListenOptions(opts, function: args.function, url: url)
        let options = parsed.server
        let protobuf = try NativeCodec(protobufAt: 3, args)
        let codec = protobuf ?? parsed.codec
        let server: MessageServer
        do {
            server = try MessageServer(url: url, options: options, eventLoop: eventLoop)
            server.sendBudget = sendBudget
        } catch {
            args.lua.pushNil()
            args.lua.push("\(error)")
            return 2
        }
        let s = LuaServer(runtime: self, server: server)
        s.codec = codec
        server.delegate = s
        s.handle = args.lua.pushHandle(object: s, class: LuaServer.className)
        if protobuf != nil { NativeCodec.keepSchema(at: 3, args) }
        servers[ObjectIdentifier(s)] = s
        return 1
    }

    /// `moonwire listen URL --script FILE`: runs FILE with `server` (listening already,
    /// made by the caller) as its `...`, and hands the server's events to the handlers
    /// FILE defines, after `observer` has seen each. The future is the exit code, as
    /// for ``run(script:arguments:)``: an error in a handler ends it with 1, and the
    /// script ends once the server has closed. Call it on `eventLoop`.
    ///
    /// ```swift
    /// let server = try MessageServer(url: url, options: options, eventLoop: runtime.eventLoop)
    /// let code = try runtime.serve(server, observer: printer, script: "greeter.lua").wait()
    /// ```
    public func serve(_ server: MessageServer, observer: any MessageServerDelegate, script path: String) -> EventLoopFuture<Int32> {
        eventLoop.preconditionInEventLoop()
        server.sendBudget = sendBudget
        let s = LuaServer(runtime: self, server: server)
        s.observer = observer
        server.delegate = s
        lua.push(object: s, class: LuaServer.className)
        s.handle = lua.reference()
        servers[ObjectIdentifier(s)] = s
        guard let handle = s.handle, let internals = preludeInternals else { return completion }
        lua.push(internals)
        lua.getField("adopt_server", table: -1)
        lua.push(handle)
        do {
            try lua.call(arguments: 1, results: 0)
            try lua.load(source: PackageResources.listen_handlers_lua, chunkName: "@moonwire/listen_handlers.lua")
            lua.push(handle)
            try lua.call(arguments: 1, results: 1)
        } catch {
            fatalError("moonwire: the built-in listen_handlers.lua failed: \(error)")
        }
        mw_insert(lua.L, -2)
        lua.pop()
        start(arguments: [path, path])
        return completion
    }

    /// Ends the script with `code`, as `mw.exit` would, from the host (on any thread).
    public func stop(exitCode code: Int32) {
        eventLoop.execute { [self] in finish(shutdownCode ?? code) }
    }

    func closeServer(_ s: LuaServer) {
        guard servers.removeValue(forKey: ObjectIdentifier(s)) != nil else { return }
        _ = s.server.close()
        // Peers report their close through the delegate; the handle goes once they have.
        // The server has closed and cut its link to `s`; `s` cuts its link to the runtime.
        s.server.closeFuture.whenComplete { _ in
            s.detach()
            guard let handle = s.handle else { return }
            self.lua.release(handle)
            s.handle = nil
            if !self.finished && !self.isAlive { self.finish(self.shutdownCode ?? 0) }
        }
    }

    func dispatch(_ event: ServerEvent, for s: LuaServer, push: (LuaState) -> Int32) {
        callDispatcher(serverEvents[event.rawValue], with: s.handle, push: push)
    }
}

extension LuaArguments {
    /// A message argument and its optional kind: text when valid UTF-8, else binary.
    /// With a `codec`, the value at `index` encoded (see ``withMessage(at:kindAt:codec:_:)``).
    func message(at index: Int32, kindAt kindIndex: Int32, codec: NativeCodec? = nil) throws(LuaArgumentError) -> (ByteBuffer, MessageKind) {
        try withMessage(at: index, kindAt: kindIndex, codec: codec) { bytes, kind in (ByteBuffer(bytes: bytes), kind) }
    }

    /// Are `bytes` exactly `word`? (Raw bytes against raw bytes: comparing with a String's
    /// UTF-8 view goes through its generic iterator, hundreds of instructions per message.)
    private static func isWord(_ bytes: UnsafeRawBufferPointer, _ word: StaticString) -> Bool {
        guard bytes.count == word.utf8CodeUnitCount, let start = bytes.baseAddress else { return false }
        return memcmp(start, word.utf8Start, bytes.count) == 0
    }

    /// Like ``message(at:kindAt:codec:)``, handing `body` the Lua string's own bytes (valid
    /// for the call only) instead of a copy; with a `codec` (a connection or server with
    /// `codec = "json"`, `"msgpack"`, `"cbor"` or a protobuf codec), the bytes the native encoder wrote for
    /// the value at `index`, sent as the codec's kind unless the script asks for another.
    /// Always inlined: a specialized copy took the closure's captures (the session of a
    /// send) as a reference of its own, a retain and a release per message.
    @inline(__always)
    func withMessage<R>(
        at index: Int32,
        kindAt kindIndex: Int32,
        codec: NativeCodec? = nil,
        _ body: (UnsafeRawBufferPointer, MessageKind) -> R
    ) throws(LuaArgumentError) -> R {
        // Compared as bytes: no Swift String per message.
        let requested = try requestedKind(at: kindIndex)
        // Closure literals handed straight to the calls: a closure kept in a local first
        // was allocated on the heap, twice per send.
        if let codec {
            return try withEncodedBytes(at: index, codec: codec) { bytes throws(LuaArgumentError) in
                body(bytes, try messageKind(of: bytes, requested: requested ?? codec.defaultKind, index: index))
            }
        }
        return try withBytes(index) { bytes throws(LuaArgumentError) in
            body(bytes, try messageKind(of: bytes, requested: requested, index: index))
        }
    }

    /// The kind of a message to send: `requested`, else text when valid UTF-8.
    private func messageKind(of bytes: UnsafeRawBufferPointer, requested: MessageKind?, index: Int32) throws(LuaArgumentError) -> MessageKind {
        func isText() -> Bool {
            var validator = UTF8Validator()
            return validator.feed(bytes) && validator.isComplete
        }
        switch requested {
        case nil: return isText() ? .text : .binary
        case .text?:
            guard isText() else { throw error(index, "not valid UTF-8: send it as \"binary\"") }
            return .text
        case .binary?: return .binary
        }
    }

    /// The kind argument at `kindIndex`, nil when absent.
    private func requestedKind(at kindIndex: Int32) throws(LuaArgumentError) -> MessageKind? {
        if isNoneOrNil(kindIndex) { return nil }
        return try withBytes(kindIndex) { name throws(LuaArgumentError) in
            if Self.isWord(name, MessageKind.binary.name) { return .binary }
            if Self.isWord(name, MessageKind.text.name) { return .text }
            throw error(kindIndex, "\"text\" or \"binary\" expected, got \"\(String(decoding: name, as: UTF8.self))\"")
        }
    }

    /// The value at `index` written by the native encoder straight into a buffer of this
    /// frame (no Lua string, no callback), whose bytes `body` gets (valid for the call
    /// only). An unencodable value raises `<function>: value.x: a function cannot be
    /// written as JSON`.
    private func withEncodedBytes<R>(
        at n: Int32, codec: NativeCodec, _ body: (UnsafeRawBufferPointer) throws(LuaArgumentError) -> R
    ) throws(LuaArgumentError) -> R {
        let stackIndex = index(n)
        var text = mwj_buffer()
        return try withUnsafeMutablePointer(to: &text) { (text) throws(LuaArgumentError) -> R in
            defer { mwj_buffer_free(text) }
            // `self` (index 0): the connection, peer or server, whose user value is a protobuf codec's schema.
            guard codec.encode(lua.L, stackIndex, session: index(0), into: text) == LUA_OK else {
                var message = lua.popString()
                let prefix = codec.encodePrefix
                if message.hasPrefix(prefix) { message.removeFirst(prefix.count) }
                throw LuaArgumentError("\(function): \(message)")
            }
            return try body(UnsafeRawBufferPointer(start: text.pointee.data, count: text.pointee.size))
        }
    }
}
