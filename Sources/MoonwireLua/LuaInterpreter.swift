import CLua
import CLuaShim
import Dispatch
import Logging
import NIOCore
import Synchronization

/// `moonwire lua`: lua5.4's command line and REPL (resources/interpreter.lua) in a
/// script's Lua state, with `mw` loaded and the event loop running. The command line
/// parses the options into a ``Plan``; the REPL's lines come from whoever reads the
/// terminal, one per `ask`, through ``enter(_:)``.
///
/// As in `lua`, nothing limits how long a chunk computes (the callback limits of
/// `moonwire run` are off unless the script sets them with `mw.limits`).
///
/// ```swift
/// let interpreter = LuaInterpreter(eventLoop: loop, plan: plan, logger: logger, io: .init(
///     writeLine: { print($0) }, writeError: { fputs($0, stderr) }, ask: { prompt in console.ask(prompt) }))
/// let code = try interpreter.run().wait()   // console lines go to interpreter.enter(line)
/// ```
public final class LuaInterpreter: @unchecked Sendable {
    /// What lua5.4's command line asks for, in its order: LUA_INIT (unless
    /// `ignoreEnvironment`), the steps, the script, then the REPL.
    public struct Plan: Sendable {
        public enum Step: Sendable {
            /// `-e stat`
            case execute(String)
            /// `-l mod` or `-l g=mod`
            case require(String)
            /// `-W`
            case warnings
        }

        public var steps: [Step] = []
        /// The whole command line, `argv[0]` being the interpreter: `arg` is made of it.
        public var argv: [String] = []
        /// Where the script is in `argv`, if there is one.
        public var script: Int?
        /// The script is read from stdin (`-`, or nothing given and stdin is no terminal).
        public var scriptFromStdin = false
        /// The REPL runs last (`-i`, or nothing given at a terminal).
        public var interactive = false
        /// `-E`: LUA_INIT, LUA_PATH and LUA_CPATH are not read.
        public var ignoreEnvironment = false

        public init() {}
    }

    /// Where the interpreter's output goes and how it asks for a line.
    public struct IO {
        /// One line of `print` (without its newline); nil: stdout.
        public var writeLine: ((UnsafeRawBufferPointer) -> Void)?
        /// Error reports, each ending with a newline.
        public var writeError: (String) -> Void
        /// Show the prompt and read a line; the answer comes back through ``enter(_:)``.
        public var ask: (String) -> Void
        /// What a driver shows (`host.show`); nil: the driver has nothing to show.
        public var show: ((Shown) -> Void)?

        public init(
            writeLine: ((UnsafeRawBufferPointer) -> Void)?, writeError: @escaping (String) -> Void, ask: @escaping (String) -> Void,
            show: ((Shown) -> Void)? = nil
        ) {
            self.writeLine = writeLine
            self.writeError = writeError
            self.ask = ask
            self.show = show
        }
    }

    /// A line a driver shows: a message (`isMessage`: a packet or event of the protocol,
    /// decoded) or an event of the session (connected, subscribed, an error).
    public struct Shown: Sendable {
        /// What it is, for machine output: "publish", "event", "open", "error" ...
        public var kind: String
        /// "in", "out" or "local".
        public var direction: String
        public var text: String
        public var isMessage: Bool
        public var isError: Bool
    }

    /// A shipped Lua program run in the interpreter's place, with the same host.
    private struct Driver {
        var chunk: [UInt8]
        var name: String
        var arguments: [String]
    }

    public let runtime: ScriptRuntime
    private let plan: Plan
    private let driver: Driver?
    private let io: IO
    /// The REPL's coroutine, waiting for its next line.
    private var lineWaiter: LuaReference?
    /// The REPL's `interrupt` function (interpreter.lua), called on the loop after Ctrl-C.
    private var interruptHandler: LuaReference?
    /// Whether a REPL chunk is running (or waiting): set on the loop, read by the thread
    /// that handles SIGINT.
    private let chunkRunning = Atomic<Bool>(false)
    /// Ctrl-Cs asked for, and the last one the loop has seen: a Ctrl-C the loop has not
    /// seen 50 ms later is raised in the Lua code holding it.
    private let interruptsAsked = Atomic<Int>(0)
    private let interruptsSeen = Atomic<Int>(0)
    private var functionEntries: [LuaFunctionEntry] = []

    public convenience init(eventLoop: EventLoop, plan: Plan, logger: Logger, io: IO) {
        self.init(eventLoop: eventLoop, plan: plan, driver: nil, logger: logger, io: io)
    }

    /// `moonwire connect --protocol`: resources/connect_protocol.lua, with `arguments`
    /// (the protocol, the URL, the options as JSON), reading lines and showing what
    /// happens through `io` until it ends itself.
    public static func connectProtocol(eventLoop: EventLoop, arguments: [String], logger: Logger, io: IO) -> LuaInterpreter {
        var plan = Plan()
        plan.interactive = true
        plan.argv = ["moonwire connect"]
        let driver = Driver(chunk: PackageResources.connect_protocol_lua, name: "@moonwire/connect_protocol.lua", arguments: arguments)
        return LuaInterpreter(eventLoop: eventLoop, plan: plan, driver: driver, logger: logger, io: io)
    }

    private init(eventLoop: EventLoop, plan: Plan, driver: Driver?, logger: Logger, io: IO) {
        self.plan = plan
        self.driver = driver
        self.io = io
        var options = ScriptRuntime.Options(
            keepGoing: plan.interactive, logger: logger, reportError: { io.writeError($0 + "\n") }
        )
        options.defaultLimits = ScriptLimits(callbackWarning: 0, callbackTimeout: 0)
        options.ignoreEnvironment = plan.ignoreEnvironment
        options.writeLine = io.writeLine
        runtime = ScriptRuntime(eventLoop: eventLoop, options: options)
        // The REPL ends the state itself (end of input, mw.exit, os.exit), not a moment
        // when nothing is open.
        runtime.heldOpen = plan.interactive
    }

    /// Runs the plan; the future is the exit code.
    public func run() -> EventLoopFuture<Int32> {
        runtime.eventLoop.flatSubmit { [self] in
            installHost()
            if let driver {
                return runtime.run(chunk: driver.chunk, name: driver.name, scriptName: plan.argv[0], arguments: driver.arguments)
            }
            var arguments = [
                (plan.interactive ? "i" : "") + (plan.ignoreEnvironment ? "E" : "") + (plan.scriptFromStdin ? "s" : ""),
                String(plan.script ?? 0), String(plan.steps.count),
            ]
            for step in plan.steps {
                switch step {
                case .execute(let code): arguments += ["e", code]
                case .require(let module): arguments += ["l", module]
                case .warnings: arguments += ["W", ""]
                }
            }
            let name = plan.script.map { plan.argv[$0] } ?? plan.argv[0]
            return runtime.run(
                chunk: PackageResources.interpreter_lua, name: "@moonwire/interpreter.lua", scriptName: name,
                arguments: arguments + plan.argv
            )
        }
    }

    /// A line the REPL asked for, or nil at the end of input. From any thread.
    public func enter(_ line: String?) {
        runtime.eventLoop.execute { [self] in
            guard let waiter = lineWaiter, !runtime.finished else { return }
            lineWaiter = nil
            let lua = runtime.lua
            lua.push(waiter)
            lua.release(waiter)
            if let line { lua.push(line) } else { lua.pushNil() }
            runtime.callIntoLua(arguments: 1)
        }
    }

    /// What `lua -v` prints: "Lua 5.4.4  Copyright (C) 1994-2022 Lua.org, PUC-Rio".
    public static var copyright: String { String(cString: mw_lua_copyright()) }

    /// SIGINT or SIGTERM: close everything and end with 128 + the signal.
    public func shutdown(signal: Int32) {
        runtime.shutdown(signal: signal)
    }

    /// Ctrl-C at the REPL, from the signal's thread: as in `lua5.4`, a chunk that is
    /// running stops with "interrupted!" and the prompt comes back. A chunk waiting
    /// (`mw.sleep`, `c:receive`) is left where it waits, as a timed-out test is; one
    /// computing gets the error raised in its Lua code, if the loop has not come round
    /// within 50 ms. False when no chunk runs: then Ctrl-C ends the REPL (as `lua5.4`'s
    /// does at its prompt).
    public func interrupt() -> Bool {
        guard chunkRunning.load(ordering: .acquiring) else { return false }
        let asked = interruptsAsked.add(1, ordering: .sequentiallyConsistent).newValue
        runtime.eventLoop.execute { [self] in
            interruptsSeen.store(asked, ordering: .sequentiallyConsistent)
            mw_guard_clear_interrupt(runtime.vm.guardState)
            guard let handler = interruptHandler, !runtime.finished else { return }
            runtime.lua.push(handler)
            runtime.callIntoLua(arguments: 0)
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { [self] in
            if interruptsSeen.load(ordering: .sequentiallyConsistent) < asked, chunkRunning.load(ordering: .acquiring) {
                // The loop has not come round: Lua code holds it. `vm` lives as long as self.
                mw_guard_interrupt(runtime.vm.guardState, Int32(MW_INTERRUPT_USER))
            }
        }
        return true
    }

    /// `mw._interpreter_host`: the prelude's internals plus the functions below.
    private func installHost() {
        runtime.installPreludeHost(named: "_interpreter_host", Self.functions, owner: self, keeping: &functionEntries)
    }

    private static let functions = LuaFunctions<LuaInterpreter>.functions(of: "interpreter_host", [
        // read_line(prompt, fn): fn(line) once the line is there (nil at the end of input).
        LuaFunction("read_line", shownAs: "read_line") { interpreter, args in
            let prompt = try args.string(1)
            try args.function(2)
            args.lua.pushValue(args.index(2))
            if let old = interpreter.lineWaiter { args.lua.release(old) }
            interpreter.lineWaiter = args.lua.reference()
            interpreter.io.ask(prompt)
            return 0
        },
        // chunk_running(bool): whether a REPL chunk runs, so that Ctrl-C interrupts it.
        LuaFunction("chunk_running", shownAs: "chunk_running") { interpreter, args in
            interpreter.chunkRunning.store(args.boolean(1), ordering: .releasing)
            return 0
        },
        // on_interrupt(fn): fn() on the loop after a Ctrl-C that interrupt() took.
        LuaFunction("on_interrupt", shownAs: "on_interrupt") { interpreter, args in
            try args.function(1)
            args.lua.pushValue(args.index(1))
            if let old = interpreter.interruptHandler { args.lua.release(old) }
            interpreter.interruptHandler = args.lua.reference()
            return 0
        },
        LuaFunction("write_error", shownAs: "write_error") { interpreter, args in
            interpreter.io.writeError(try args.string(1))
            return 0
        },
        // show(what, kind, direction, text): what is "message", "event" or "error".
        LuaFunction("show", shownAs: "show") { interpreter, args in
            let what = try args.string(1)
            interpreter.io.show?(Shown(
                kind: try args.string(2), direction: try args.string(3), text: try args.string(4),
                isMessage: what == "message", isError: what == "error"))
            return 0
        },
    ])
}
