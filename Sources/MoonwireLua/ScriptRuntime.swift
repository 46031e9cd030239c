import CLua
import CLuaShim
import CMoonJSON
import Foundation
import CMoonPack
import CMoonProto
import Logging
import MoonwireCore
import NIOCore

/// One Lua state driven by one event loop: the script, its timers and
/// (later) its connections. Lua runs only on `eventLoop`; channel handlers and
/// timers call into it directly there.
///
/// A script keeps running while anything is alive (a pending timer, an open
/// resource); then `completion` succeeds with the exit code. An uncaught error
/// in a callback is reported and ends the script with 1, unless `keepGoing`.
///
/// ```swift
/// let runtime = ScriptRuntime(eventLoop: loop, options: .init(logger: logger))
/// let code = try runtime.run(script: "bot.lua", arguments: ["--fast"]).wait()
/// ```
public final class ScriptRuntime: @unchecked Sendable {
    public struct Options {
        /// Log uncaught errors in callbacks and go on, instead of ending with exit code 1.
        public var keepGoing = false
        public var logger: Logger
        /// Receives every uncaught Lua error: `file:line: message` and a traceback.
        public var reportError: (String) -> Void
        /// `mw.worker` and `mw.workers`: which of the copies of a script running
        /// side by side (`run --workers`) this is, counting from 1.
        public var worker: Int
        public var workers: Int
        /// `run --record FILE`: every connection of the script is recorded there.
        public var recorder: SessionRecorder?
        /// `run --shard I/N`: this process's part of `mw.rate` and `mw.vus`.
        public var shard: Shard?
        /// The limits given on the command line; they win over the script's `mw.limits`.
        public var limits: ScriptLimits
        /// Timers, sleeps, heartbeats, backoff and timeouts on a virtual clock (`--virtual-time`).
        public var virtualTime = false
        /// What the limits are where neither the command line nor the script chose
        /// (`moonwire lua`: no callback limits, as in `lua`); then the usual defaults.
        public var defaultLimits = ScriptLimits()
        /// `lua -E`: package.path and package.cpath ignore LUA_PATH and LUA_CPATH.
        public var ignoreEnvironment = false
        /// Where `print` writes its lines (without the newline); nil: stdout.
        public var writeLine: ((UnsafeRawBufferPointer) -> Void)?
        /// Put before `package.path` and `package.cpath` when the state is made: the
        /// script's folder and `run --lua-path` (see ``ModuleSearchPath``).
        public var searchPath = ModuleSearchPath()
        /// `run --start-at`: when `mw.rate` and `mw.vus` begin, wall clock (seconds since
        /// 1970); the run's duration counts from there. Real clock only.
        public var startAt: Double?
        /// `run --busy-poll`: how long the loop polls for an answer after a flush before
        /// it sleeps (``BusyPoll``); zero: never.
        public var busyPoll = TimeAmount.zero

        public init(
            keepGoing: Bool = false, logger: Logger, reportError: @escaping (String) -> Void = ScriptRuntime.writeToStderr,
            worker: Int = 1, workers: Int = 1, recorder: SessionRecorder? = nil, limits: ScriptLimits = .init(),
            virtualTime: Bool = false, searchPath: ModuleSearchPath = ModuleSearchPath()
        ) {
            self.virtualTime = virtualTime
            self.searchPath = searchPath
            self.limits = limits
            self.recorder = recorder
            self.keepGoing = keepGoing
            self.logger = logger
            self.reportError = reportError
            self.worker = worker
            self.workers = workers
        }

        public init(_ options: Options, shard: Shard?) {
            self = options
            self.shard = shard
        }
    }

    /// Why a script could not start.
    public enum StartError: Error, CustomStringConvertible {
        /// The script does not compile: `file:line: message`.
        case compile(String)

        public var description: String {
            switch self {
            case .compile(let message): return message
            }
        }
    }

    public static let version = "0.1.0"

    /// `arg[-1]` of every script, as `lua` gives its own path there: a shell command
    /// that runs Lua with `mw` loaded (`moonwire lua`), so that a script or spec can
    /// start another interpreter with `io.popen(arg[-1] .. " -e ...")`. The path is
    /// this executable's own, quoted for the shell when it needs to be.
    public static let interpreter: String = {
        let path = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let plain = path.allSatisfy { $0.isLetter || $0.isNumber || "/._-+,:@%".contains($0) }
        let quoted = plain ? path : "'" + path.replacingOccurrences(of: "'", with: "'\\''") + "'"
        return quoted + " lua"
    }()

    public let eventLoop: EventLoop
    public let options: Options
    let vm: LuaVM
    var lua: LuaState { vm.state }
    let timers: TimerScheduler
    /// The clock everything of the script reads (docs/testing.md, "Virtual time").
    public let clock: RuntimeClock
    /// Real-time timers for the test runner's per-test timeout, apart from `timers` when
    /// the clock is virtual.
    lazy var wallTimers: TimerScheduler = clock.isVirtual ? TimerScheduler(eventLoop: eventLoop, clock: .real) : timers
    private let completionPromise: EventLoopPromise<Int32>
    private var startMain: LuaReference?
    /// The prelude's internals table, for the test runner.
    private(set) var preludeInternals: LuaReference?
    private(set) var finished = false
    /// Connections that are alive, by identity.
    var connections: [ObjectIdentifier: LuaConnection] = [:]
    /// The prelude's dispatchers of connection events.
    var connectionEvents: [LuaReference?] = []
    /// Servers that listen, by identity.
    var servers: [ObjectIdentifier: LuaServer] = [:]
    /// The prelude's dispatchers of server events.
    var serverEvents: [LuaReference?] = []
    /// The run's metrics (built-in and the script's own), touched only on `eventLoop`.
    public let metrics = RunMetrics()
    /// This loop's part of the process-wide send budget, charged by every connection and
    /// peer of the script (`--send-budget`, `mw.limits { send_budget = }`).
    public let sendBudget: SendBudgetPool
    /// The whole process's send budget, as the limits say (``sendBudget`` holds this
    /// worker's part): what refusals and the warning name.
    var processSendBudget = 0

    /// Every Swift function Lua can call, registered: the trampolines' contexts.
    private var functionEntries: [LuaFunctionEntry] = []

    /// `functions` bound to this runtime, for registering in its Lua state.
    private func bound(_ functions: LuaFunctions<ScriptRuntime>) -> [(key: String, entry: LuaFunctionEntry)] {
        functions.bound(to: self, keeping: &functionEntries)
    }

    /// The exit code, once the script has ended.
    public var completion: EventLoopFuture<Int32> { completionPromise.futureResult }

    var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    public init(eventLoop: EventLoop, options: Options) {
        self.eventLoop = eventLoop
        self.options = options
        self.vm = LuaVM(ignoringEnvironment: options.ignoreEnvironment)
        self.clock = RuntimeClock(eventLoop: eventLoop)
        if options.virtualTime { clock.makeVirtual() }
        self.timers = TimerScheduler(eventLoop: eventLoop, clock: clock)
        self.completionPromise = eventLoop.makePromise()
        self.sendBudget = SendBudgetPool(budget: 0, eventLoop: eventLoop)
        metrics.shard = options.shard
        if let startAt = options.startAt, !options.virtualTime {
            metrics.startRun(at: startAt)
        }
        // A cycle until `retire` cuts it: nothing holds the runtime weakly, so that its
        // reference counts stay off Swift's slow path (docs/architecture.md, "Who owns whom").
        sendBudget.onFirstReached = { self.warnSendBudgetReached() }
        installGuard()
        installModule()
    }

    deinit {
        // A runtime dropped before its script ended (or before its end had waited
        // for its closes: the loop shut down) must not leave the futures hanging.
        if !retired { completionPromise.fail(ChannelError.alreadyClosed) }
        connectionsGone?.fail(ChannelError.alreadyClosed)
    }

    /// What the runtime puts on its loop's thread before the script starts: its clock and
    /// the loop's busy polling.
    private func installOnLoop() {
        clock.install()
        BusyPoll.install(on: eventLoop, window: options.busyPoll) { [logger = options.logger] in logger.warning("\($0)") }
    }

    /// Compiles and starts a script; the future is the exit code, or fails with
    /// `StartError.compile` before anything ran.
    public func run(script path: String, arguments: [String]) -> EventLoopFuture<Int32> {
        eventLoop.flatSubmit { [self] in
            installOnLoop()
            do throws(LuaError) {
                try lua.load(file: path)
            } catch {
                return eventLoop.makeFailedFuture(StartError.compile(error.description))
            }
            start(arguments: [path] + arguments)
            return completion
        }
    }

    /// Compiles and starts a chunk given as source text (tests, embedding).
    public func run(source: String, chunkName: String, arguments: [String] = []) -> EventLoopFuture<Int32> {
        run(chunk: Array(source.utf8), name: "=" + chunkName, scriptName: chunkName, arguments: arguments)
    }

    /// `name` is Lua's chunk name: "@file" or "=label".
    func run(chunk: [UInt8], name: String, scriptName: String, arguments: [String]) -> EventLoopFuture<Int32> {
        eventLoop.flatSubmit { [self] in
            installOnLoop()
            do throws(LuaError) {
                try lua.load(source: chunk, chunkName: name)
            } catch {
                return eventLoop.makeFailedFuture(StartError.compile(error.description))
            }
            start(arguments: [scriptName] + arguments)
            return completion
        }
    }

    /// SIGINT / SIGTERM, from any thread: stop timers and servers, close every
    /// connection with 1001 (going away), and end with 128 + signal once they are
    /// closed, or after the close timeout at the latest. From then on the script
    /// cannot open anything new. Lua code running right now (a callback in an
    /// endless loop) is unwound first, by the guard's count hook.
    public func shutdown(signal: Int32) {
        mw_guard_signal(vm.guardState, signal)
        eventLoop.execute { [self] in takeSignal() }
    }

    /// 128 + the signal the guard holds and the loop has not acted on yet.
    var pendingSignalCode: Int32? {
        let signal = mw_guard_pending_signal(vm.guardState)
        return signal != 0 ? 128 + signal : nil
    }

    /// On the loop: acts on a signal the guard holds, if any.
    func takeSignal() {
        let signal = mw_guard_take_signal(vm.guardState)
        guard signal != 0, !finished, shutdownCode == nil else { return }
        let code = 128 + signal
        shutdownCode = code
        timers.cancelAll()
        for s in Array(servers.values) { closeServer(s) }
        let open = Array(connections.values)
        guard !open.isEmpty else { return finish(code) }
        for c in open { c.connection.close(code: CloseCode.goingAway, reason: "going away") }
        eventLoop.scheduleTask(in: closeGrace) { self.finish(code) }
    }

    /// How long an ending script waits for its connections and servers to close:
    /// the longest close timeout among them and a little (their own close
    /// handshakes give up after it, so this only guards against a lost event).
    var closeGrace: TimeAmount {
        let longest = connections.values.map(\.closeTimeout).max() ?? .seconds(Int64(5))
        return max(longest, .seconds(Int64(5))) + .seconds(Int64(1))
    }

    /// The compiled main chunk is on top of the stack.
    func start(arguments: [String]) {
        guard let startMain else { return }
        // The arguments all go on the stack at once, and Lua promises only 20 free slots:
        // past them a push writes over the heap (a script with 30 arguments crashed).
        guard lua.ensureStack(Int32(arguments.count) + 2) else {
            lua.pop()
            _ = uncaught("too many script arguments (\(arguments.count))")
            finish(1)
            return
        }
        lua.push(startMain)
        mw_insert(lua.L, -2)
        for argument in arguments { lua.push(argument) }
        callIntoLua(arguments: Int32(1 + arguments.count))
    }

    /// Calls the function below `arguments` values on the main stack, then ends
    /// the script if nothing is left alive. Returns true when the call completed
    /// and left its `results` on the stack.
    @discardableResult
    func callIntoLua(arguments: Int32, results: Int32 = 0) -> Bool {
        guard !finished else {
            lua.pop(arguments + 1)
            return false
        }
        var completed = false
        callDepth += 1
        do throws(LuaError) {
            try lua.call(arguments: arguments, results: results)
            completed = true
        } catch .runtime(let message) {
            uncaught(message)
        } catch {
            // mw.exit (already finishing), or a signal (taken below).
        }
        callDepth -= 1
        // Memory a refused allocation left behind goes now, so that the next
        // callback (under --keep-going) has it back.
        if callDepth == 0 { mw_guard_collect_after_refusal(lua.L) }
        // A signal that unwound this call is acted on by the task `shutdown`
        // queued, on a clean stack (closes begun in the middle of a channel's
        // read here went out unflushed); it still sets the exit code.
        if !finished && !isAlive { finish(shutdownCode ?? pendingSignalCode ?? 0) }
        return completed
    }

    /// Calls into Lua in progress (a Swift function that Lua called may call in again).
    private(set) var callDepth = 0

    /// What the script chose with `mw.limits` (the command line's choices win).
    var scriptLimits = ScriptLimits()

    /// Set while shutting down on a signal: the exit code once everything closed.
    var shutdownCode: Int32?

    var isAlive: Bool { heldOpen || timers.count > 0 || !connections.isEmpty || !servers.isEmpty }

    /// Set by the test runner: the script ends only by `mw.exit`, never because
    /// nothing is left alive between two tests.
    var heldOpen = false
    /// What `finish` waits for before it completes: servers closing, and whether
    /// every connection has ended (see `connectionEnded`).
    private var closingServers: [(server: LuaServer, closed: EventLoopFuture<Void>)] = []
    private var connectionsGone: EventLoopPromise<Void>?
    private var retired = false

    /// An error nothing caught: report it, and end the script unless `keepGoing`.
    /// Returns true when the script goes on.
    @discardableResult
    func uncaught(_ message: String) -> Bool {
        options.reportError(explainingMemoryLimit(message))
        if options.keepGoing { return true }
        finish(1)
        return false
    }

    /// Ends the script: no Lua runs from here on. Servers stop listening and
    /// connections close without reconnecting; the exit code is delivered once
    /// they have closed (bounded by `closeGrace`), and only then are their
    /// delegates detached, so whatever arrives later is dropped.
    func finish(_ code: Int32) {
        guard !finished else { return }
        finished = true
        heldOpen = false
        timers.cancelAll()
        // The test runner's real-time timers, when the clock is virtual (each holds the runtime).
        if clock.isVirtual { wallTimers.cancelAll() }
        let grace = closeGrace
        for s in servers.values { closingServers.append((s, s.server.close())) }
        servers.removeAll()
        let gone = eventLoop.makePromise(of: Void.self)
        connectionsGone = gone
        for c in Array(connections.values) { c.connection.close(code: CloseCode.goingAway, reason: "script ended") }
        connectionsEnded()
        let closed = EventLoopFuture.andAllComplete(closingServers.map(\.closed) + [gone.futureResult], on: eventLoop)
        let deadline = eventLoop.scheduleTask(in: grace) { [self] in retire(code) }
        // Complete after the Lua code on the stack now has unwound, so nobody
        // acting on the exit code races the loop still running Lua.
        closed.whenComplete { [self] _ in
            deadline.cancel()
            eventLoop.execute { self.retire(code) }
        }
    }

    /// While finishing: the last connection has ended.
    func connectionsEnded() {
        guard connections.isEmpty, let gone = connectionsGone else { return }
        connectionsGone = nil
        gone.succeed(())
    }

    /// The last step of `finish`: nothing of the script's reaches Lua any more.
    private func retire(_ code: Int32) {
        guard !retired else { return }
        retired = true
        // The loop may run another script (the next test file): its own clock, not this one.
        clock.uninstall()
        // Every link to the runtime is cut here, at the latest: connections and servers
        // that did not close in time report to nobody, and nothing holds the runtime.
        for c in connections.values { c.detach() }
        for s in closingServers { s.server.detach() }
        closingServers.removeAll()
        sendBudget.onFirstReached = nil
        connectionsGone?.succeed(())
        connectionsGone = nil
        completionPromise.succeed(code)
    }

    public static func writeToStderr(_ message: String) {
        var bytes = Array((message + "\n").utf8)
        _ = bytes.withUnsafeMutableBytes { fwrite($0.baseAddress, 1, $0.count, stderr) }
    }

    /// The prelude's parts (resources/prelude/), in the order they run: each a
    /// chunk called with `host` and the table the parts share; the last returns
    /// the module, the start function and the internals.
    static let preludeParts: [(name: String, source: [UInt8])] = [
        ("runtime", PackageResources.runtime_lua),
        ("connections", PackageResources.connections_lua),
        ("sessions", PackageResources.sessions_lua),
        ("servers", PackageResources.servers_lua),
        ("glue", PackageResources.glue_lua),
        ("metrics", PackageResources.metrics_lua),
        ("load_models", PackageResources.load_models_lua),
        ("module", PackageResources.module_lua),
    ]

    private func installModule() {
        lua.registerClass(LuaTimer.className, methods: bound(Self.timerMethods), close: "cancel")
        lua.registerClass(LuaConnection.className, methods: bound(Self.connectionMethods))
        lua.registerClass(LuaServer.className, methods: bound(Self.serverMethods))
        lua.registerClass(LuaPeer.className, methods: bound(Self.peerMethods))
        lua.push(functions: bound(Self.hostFunctions) + bound(Self.metricsFunctions) + bound(Self.metricMethods))
        for (className, field) in [
            (LuaConnection.className, "connection_methods"), (LuaServer.className, "server_methods"), (LuaPeer.className, "peer_methods"),
        ] {
            lua.getMetatable(named: className)
            lua.getField("__index", table: -1)
            lua.setField(field, table: -3)
            lua.pop()
        }
        lua.getMetatable(named: LuaPeer.className)
        lua.setField("peer_metatable", table: -2)
        // The library chunks the prelude builds on, each a function returning its module.
        for (field, source, name) in [
            ("json_module", PackageResources.json_lua, "@moonwire/json.lua"),
            ("inspect_module", PackageResources.inspect_lua, "@moonwire/inspect.lua"),
            ("protobuf_module", PackageResources.protobuf_lua, "@moonwire/protobuf.lua"),
        ] {
            do {
                try lua.load(source: source, chunkName: name)
            } catch {
                fatalError("moonwire: the built-in \(name) does not compile: \(error)")
            }
            lua.setField(field, table: -2)
        }
        // host.json_native(module): json.lua's module with the native encode and decode.
        mw_pushcfunction(lua.L, mw_json_install)
        lua.setField("json_native", table: -2)
        // host.pack_native(json_module) -> mw.msgpack, mw.cbor (sharing mw.json's markers).
        mw_pushcfunction(lua.L, mw_pack_install)
        lua.setField("pack_native", table: -2)
        // The codec names Swift runs natively (`codec = NAME`), for the prelude.
        lua.push(LuaValue.table(Dictionary(uniqueKeysWithValues: NativeCodec.named.map { (LuaValue.text($0.name), LuaValue.boolean(true)) })))
        lua.setField("native_codecs", table: -2)
        // host.protobuf_native(array_mt, object_mt): mw.protobuf's native half (CMoonProto).
        mw_pushcfunction(lua.L, mw_protobuf_open)
        lua.setField("protobuf_native", table: -2)
        mw_push_exit_sentinel(lua.L)
        lua.setField("exit_sentinel", table: -2)
        lua.push(Self.version)
        lua.setField("version", table: -2)
        lua.push(Self.interpreter)
        lua.setField("interpreter", table: -2)
        lua.push(options.searchPath.path)
        lua.setField("lua_path", table: -2)
        lua.push(options.searchPath.cpath)
        lua.setField("lua_cpath", table: -2)
        lua.push(options.worker)
        lua.setField("worker", table: -2)
        lua.push(options.workers)
        lua.setField("workers", table: -2)
        lua.push(options.shard?.index ?? 1)
        lua.setField("shard_index", table: -2)
        lua.push(options.shard?.count ?? 1)
        lua.setField("shard_count", table: -2)
        lua.push(metrics.requestLatency.index)
        lua.setField("request_latency", table: -2)
        lua.push(metrics.expectLatency.index)
        lua.setField("expect_latency", table: -2)
        // A message its connection's codec could not decode counts as an error.
        lua.push(metrics.errors.index)
        lua.setField("errors_metric", table: -2)
        lua_createtable(lua.L, 0, 32)
        for (i, part) in Self.preludeParts.enumerated() {
            let name = "@moonwire/prelude/\(part.name).lua"
            do {
                try lua.load(source: part.source, chunkName: name)
            } catch {
                fatalError("moonwire: the built-in \(name) does not compile: \(error)")
            }
            lua.pushValue(-3)
            lua.pushValue(-3)
            do {
                try lua.call(arguments: 2, results: i == Self.preludeParts.count - 1 ? 3 : 0)
            } catch {
                fatalError("moonwire: the built-in \(name) failed: \(error)")
            }
        }
        lua.getField("events", table: -1)
        connectionEvents = ConnectionEvent.allCases.map { event in
            lua.getField(event.name, table: -1)
            return lua.reference()
        }
        lua.pop()
        lua.getField("server_events", table: -1)
        serverEvents = ServerEvent.allCases.map { event in
            lua.getField(event.name, table: -1)
            return lua.reference()
        }
        lua.pop()
        preludeInternals = lua.reference()
        startMain = lua.reference()
        // The module, the shared table and host.
        lua.pop(3)
    }
}
