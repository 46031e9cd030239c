import CLua
import CLuaShim
import Logging
import MoonwireCore
import NIOCore

/// The Swift functions the prelude receives as `host`: the ones it exposes
/// in `mw` as they are, and the private ones it builds on.
extension ScriptRuntime {
    static let hostFunctions = LuaFunctions<ScriptRuntime>.functions(of: "mw", [
        LuaFunction("after") { rt, args in try rt.schedule(args, repeating: false) },
        LuaFunction("every") { rt, args in try rt.schedule(args, repeating: true) },
        LuaFunction("now") { rt, args in
            args.lua.push(rt.clock.seconds)
            return 1
        },
        // The load models' schedule: when it begins (`--start-at`), and that it did.
        LuaFunction("load_start") { rt, args in
            args.lua.push(rt.metrics.loadStart(clock: rt.clock, logger: rt.options.logger))
            return 1
        },
        // (offset): the first start, `offset` seconds into its schedule.
        LuaFunction("load_began") { rt, args in
            rt.metrics.loadBegan(offset: try args.number(1))
            return 0
        },
        LuaFunction("virtual_time") { rt, args in
            args.lua.push(rt.clock.isVirtual)
            return 1
        },
        LuaFunction("connect", wrapped: true) { rt, args in try rt.connect(args) },
        LuaFunction("listen", wrapped: true) { rt, args in try rt.listen(args) },
        LuaFunction("exit") { rt, args in try rt.exit(args) },
        LuaFunction("limits") { rt, args in try rt.setLimits(args) },
        LuaFunction("log") { rt, args in try rt.log(args) },
        LuaFunction("write_line", shownAs: "print") { rt, args in
            try args.withBytes(1) { line in
                if let writeLine = rt.options.writeLine { writeLine(line) } else { ScriptRuntime.writeLineToStdout(line) }
            }
            return 0
        },
        // The prelude's auto_reply rules with a function: answers a connection's or a
        // peer's probe (the rules of two strings are answered in Core).
        LuaFunction("auto_answer", shownAs: "auto_reply") { _, args in
            let (reply, kind) = try args.message(at: 2, kindAt: 3)
            if let s = args.lua.object(at: args.index(1), class: LuaConnection.className, as: LuaSession.self)
                ?? args.lua.object(at: args.index(1), class: LuaPeer.className, as: LuaSession.self) {
                s.session.answerProbe(reply, kind: kind)
            } else {
                throw args.typeError(1, expected: "peer")
            }
            return 0
        },
        LuaFunction("uncaught", shownAs: "uncaught") { rt, args in
            if rt.uncaught(try args.string(1)) { return 0 }
            throw LuaError.exit
        },
        LuaFunction("hex") { _, args in
            args.lua.push(try args.withBytes(1) { BinaryText.hex($0) })
            return 1
        },
        LuaFunction("unhex") { _, args in try args.decode(BinaryText.unhex) },
        LuaFunction("base64") { _, args in
            args.lua.push(try args.withBytes(1) { BinaryText.base64($0) })
            return 1
        },
        LuaFunction("unbase64") { _, args in try args.decode(BinaryText.unbase64) },
        // The prelude's searcher for the modules shipped in the binary: source and chunk
        // name, or nothing.
        LuaFunction("bundled_module", shownAs: "require") { _, args in
            let name = try args.string(1)
            guard let source = BundledModules.sources[name] else { return 0 }
            args.lua.push(source)
            args.lua.push(BundledModules.chunkName(name))
            return 2
        },
    ])

    func exit(_ args: LuaArguments) throws -> Int32 {
        let code: Int32
        if args.type(1) == LUA_TBOOLEAN {
            code = args.boolean(1) ? 0 : 1
        } else {
            let n = try args.optionalInteger(1) ?? 0
            guard (0...255).contains(n) else { throw args.error(1, "exit code must be 0 to 255") }
            code = Int32(n)
        }
        // A signal's shutdown under way keeps its 130 / 143.
        finish(shutdownCode ?? code)
        throw LuaError.exit
    }

    /// `line` and a newline as one block, flushed: lines from workers sharing
    /// stdout stay whole.
    static func writeLineToStdout(_ line: UnsafeRawBufferPointer) {
        flockfile(stdout)
        defer { funlockfile(stdout) }
        fwrite(line.baseAddress, 1, line.count, stdout)
        fputc(0x0A, stdout)
        fflush(stdout)
    }

    func log(_ args: LuaArguments) throws -> Int32 {
        let levels: [String: Logger.Level] = ["debug": .debug, "info": .info, "warn": .warning, "error": .error]
        let name = try args.string(1)
        guard let level = levels[name] else { throw args.error(1, "unknown log level") }
        let message = try args.string(2)
        options.logger.log(level: level, "\(message)")
        return 0
    }
}

extension LuaArguments {
    /// Decodes argument 1 with `decode`: the result, or nil and the reason.
    func decode(_ decode: ([UInt8]) throws(BinaryText.DecodeError) -> [UInt8]) throws -> Int32 {
        let input = try bytes(1)
        do {
            lua.push(try decode(input))
            return 1
        } catch {
            lua.pushNil()
            lua.push("\(function): \(error.description)")
            return 2
        }
    }
}

extension ScriptRuntime {
    /// `mw.<field>`: the prelude's internals plus `functions` bound to `owner`, for a host
    /// that drives the script (the test runner's `_test_host`, `moonwire lua`'s
    /// `_interpreter_host`). `entries` must live as long as Lua can call them.
    func installPreludeHost<Owner: AnyObject>(
        named field: String, _ functions: LuaFunctions<Owner>, owner: Owner, keeping entries: inout [LuaFunctionEntry]
    ) {
        guard let internals = preludeInternals else { return }
        lua.getGlobal("mw")
        lua.push(internals)
        for (key, entry) in functions.bound(to: owner, keeping: &entries) {
            lua.push(function: LuaFunctionEntry.enter, context: entry.context)
            lua.setField(key, table: -2)
        }
        lua.setField(field, table: -2)
        lua.pop()
    }
}
