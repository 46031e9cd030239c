import CLua
import CLuaShim
import Logging
import MoonwireCore
import NIOCore

/// The Swift functions the prelude receives as `host`: the ones it exposes
/// in `mw` as they are, and the private ones it builds on.
extension ScriptRuntime {
    static let hostFunctions: [(String, mw_swift_fn)] = [
        ("after", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.after", as: ScriptRuntime.self) { rt, args in try rt.schedule(args, repeating: false) }
        }),
        ("every", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.every", as: ScriptRuntime.self) { rt, args in try rt.schedule(args, repeating: true) }
        }),
        ("now", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.now", as: ScriptRuntime.self) { rt, args in
                args.lua.push(rt.clock.seconds)
                return 1
            }
        }),
        ("virtual_time", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.virtual_time", as: ScriptRuntime.self) { rt, args in
                args.lua.push(rt.clock.isVirtual)
                return 1
            }
        }),
        ("connect", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.connect", wrapped: true, as: ScriptRuntime.self) { rt, args in try rt.connect(args) }
        }),
        ("listen", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.listen", wrapped: true, as: ScriptRuntime.self) { rt, args in try rt.listen(args) }
        }),
        ("exit", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.exit", as: ScriptRuntime.self) { rt, args in try rt.exit(args) }
        }),
        ("limits", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.limits", as: ScriptRuntime.self) { rt, args in try rt.setLimits(args) }
        }),
        ("log", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.log", as: ScriptRuntime.self) { rt, args in try rt.log(args) }
        }),
        ("write_line", { L, ctx in
            LuaBinding.enter(L, ctx, "print", as: ScriptRuntime.self) { _, args in
                try args.withBytes(1) { ScriptRuntime.writeLineToStdout($0) }
                return 0
            }
        }),
        // The prelude's auto_reply rules with a function: answers a connection's or a
        // peer's probe (the rules of two strings are answered in Core).
        ("auto_answer", { L, ctx in
            LuaBinding.enter(L, ctx, "auto_reply", as: ScriptRuntime.self) { rt, args in
                let (reply, kind) = try args.message(at: 2, kindAt: 3)
                if let c = args.lua.object(at: 1, class: LuaConnection.className, as: LuaConnection.self) {
                    c.connection.answerProbe(reply, kind: kind)
                } else {
                    try rt.peer(args).peer.answerProbe(reply, kind: kind)
                }
                return 0
            }
        }),
        ("uncaught", { L, ctx in
            LuaBinding.enter(L, ctx, "uncaught", as: ScriptRuntime.self) { rt, args in
                if rt.uncaught(try args.string(1)) { return 0 }
                throw LuaError.exit
            }
        }),
        ("hex", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.hex", as: ScriptRuntime.self) { _, args in
                args.lua.push(try args.withBytes(1) { BinaryText.hex($0) })
                return 1
            }
        }),
        ("unhex", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.unhex", as: ScriptRuntime.self) { _, args in
                try args.decode(BinaryText.unhex)
            }
        }),
        ("base64", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.base64", as: ScriptRuntime.self) { _, args in
                args.lua.push(try args.withBytes(1) { BinaryText.base64($0) })
                return 1
            }
        }),
        ("unbase64", { L, ctx in
            LuaBinding.enter(L, ctx, "mw.unbase64", as: ScriptRuntime.self) { _, args in
                try args.decode(BinaryText.unbase64)
            }
        }),
    ]

    func exit(_ args: LuaArguments) throws -> Int32 {
        let code: Int32
        if args.lua.type(at: 1) == LUA_TBOOLEAN {
            code = args.lua.boolean(at: 1) ? 0 : 1
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
