import ArgumentParser
import Dispatch
import MoonwireCore
import MoonwireLua
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a bot or automation script.",
        discussion: """
            The script keeps running while anything is alive: an open or reconnecting \
            connection, a listening server, a pending timer or a waiting coroutine. \
            mw.exit(code) ends it at once. SIGINT and SIGTERM close everything and exit \
            130 and 143; a second SIGINT exits at once.

            With --workers N, N copies of the script run side by side, each in its own \
            Lua state on its own thread, sharing nothing; mw.worker (1 to N) and \
            mw.workers tell them apart. A copy that ends (mw.exit, an error, nothing \
            left alive) ends only itself. moonwire exits once every copy has ended, \
            with the first non-zero exit code in worker order, else 0. A signal ends \
            every copy still running; log lines and error reports name the worker.
            """
    )

    /// More threads than this is a typo, not a machine.
    static let maxWorkers = 256

    @OptionGroup var global: GlobalOptions

    @OptionGroup(title: "Measured runs") var measured: MetricsOptions

    @Flag(name: .customLong("virtual-time"), help: "Run timers, sleeps, heartbeats, backoff and timeouts on a virtual clock that jumps to the next deadline when nothing else can happen (as in moonwire test).")
    var virtualTime = false

    @Flag(help: "Log an uncaught error in a callback and go on, instead of exiting with 1.")
    var keepGoing = false

    @Option(name: .customLong("busy-poll"), help: ArgumentHelp("After sending, poll for the answer this many microseconds before sleeping (0: never), yielding the CPU between polls, as Linux's net.core.busy_poll does: a reply from another CPU is then read without waking the thread. Default: 50; polling that does not pay (the answer comes from the same CPU, or later than that) backs off by itself. Never with --virtual-time.", valueName: "microseconds"))
    var busyPoll: Int?

    @Option(help: "How many copies of the script to run at once, each in its own Lua state and thread (1 to \(Run.maxWorkers)).")
    var workers = 1

    @Option(name: [.customShort("m"), .customLong("lua-path")], help: ArgumentHelp("Lua module paths searched first, before the script's own folder and package.path (';'-separated templates such as 'lib/?.lua', like busted's --lpath; not -l, which is lua's 'require a library').", valueName: "templates"))
    var luaPath = ""

    @Option(name: .customLong("lua-cpath"), help: ArgumentHelp("C module paths searched first, before the script's own folder and package.cpath (';'-separated templates such as 'lib/?.so').", valueName: "templates"))
    var luaCPath = ""

    @OptionGroup var recording: RecordOptions

    @OptionGroup(title: "Limits") var limits: LimitOptions

    @Argument(help: "The Lua script to run.")
    var script: String

    @Argument(parsing: .captureForPassthrough, help: "Arguments for the script: mw.args, and arg as in the lua program.")
    var arguments: [String] = []

    func validate() throws {
        guard (1...Self.maxWorkers).contains(workers) else {
            throw ValidationError("--workers must be 1 to \(Self.maxWorkers); give the number of copies to run, such as the number of cores")
        }
        if let busyPoll, !(0...1_000_000).contains(busyPoll) {
            throw ValidationError("--busy-poll must be 0 to 1000000 microseconds (0 turns polling off)")
        }
        if let busyPoll, busyPoll > 0, virtualTime {
            throw ValidationError("--busy-poll waits on the real clock: it cannot go with --virtual-time")
        }
        // The shard and the start, from the options or the engine's variables (not in
        // MetricsOptions.validate: `metrics merge` parses those options too, wherever it runs).
        _ = try measured.resolvedShard()
        if try measured.resolvedStartAt() != nil, virtualTime {
            throw ValidationError("--start-at is a wall-clock instant: it cannot go with --virtual-time")
        }
    }

    func run() throws {
        try ScriptFile.checkReadable(script)
        let recorder = try recording.makeRecorder()
        let shard = try measured.resolvedShard()
        let startAt = try measured.resolvedStartAt()
        let chosenLimits = try limits.limits()
        let group = try LoopGroup.make(threads: workers, metricsDelegate: virtualTime ? LoopTicks() : nil)
        let searchPath = ModuleSearchPath(script: script, luaPath: luaPath, luaCPath: luaCPath)
        let busyPollWindow = virtualTime ? .zero : busyPoll.map { TimeAmount.microseconds(Int64($0)) } ?? BusyPoll.defaultWindow
        let runtimes = group.makeIterator().enumerated().map { offset, loop in
            let worker = offset + 1
            // One worker is the plain case: its lines look as they always did.
            let named = workers > 1 ? worker : nil
            var options = ScriptRuntime.Options(
                keepGoing: keepGoing, logger: global.makeLogger(worker: named),
                reportError: { [global] in global.reportError($0, worker: named) },
                worker: worker, workers: workers, recorder: recorder, limits: chosenLimits, virtualTime: virtualTime,
                searchPath: searchPath
            )
            options.startAt = startAt
            options.busyPoll = busyPollWindow
            let runtime = ScriptRuntime(eventLoop: loop, options: options.sliced(shard: shard, worker: worker, workers: workers))
            runtime.metrics.shard = shard
            return runtime
        }
        let live = try LiveMetrics.start(measured, runtimes: runtimes, group: group, reportError: { global.reportError($0) })
        let signals = SignalTrap { signal in runtimes.forEach { $0.shutdown(signal: signal) } }
        let finished = runtimes.map { $0.run(script: script, arguments: arguments) }
        var codes: [Int32] = []
        var startError: ScriptRuntime.StartError?
        for future in finished {
            do {
                codes.append(try future.wait())
            } catch let error as ScriptRuntime.StartError {
                // Every worker compiles the same file: one report is enough.
                startError = startError ?? error
                codes.append(1)
            }
        }
        if let startError { global.reportError(startError.description) }
        signals.cancel()
        live?.stop()
        let scriptCode = codes.first { $0 != 0 } ?? 0
        var code = scriptCode
        var final: MetricsSnapshot?
        var declared: [Threshold] = []
        if startError == nil, let snapshot = try? LiveMetrics.gather(runtimes).wait() {
            declared = (try? runtimes[0].eventLoop.submit { runtimes[0].metrics.thresholds }.wait()) ?? []
            final = snapshot
        }
        live?.close(final: final, thresholds: measured.thresholds + declared)
        if let final {
            code = measured.finish(final, scriptThresholds: declared, scriptCode: scriptCode, deferred: shard != nil) { global.reportError($0) }
        }
        if let error = measured.writeReport(final, thresholds: measured.thresholds + declared) {
            global.reportError(error)
            if code == 0 { code = 1 }
        }
        ProcessEnd.exit(code, parking: runtimes.map(\.eventLoop))
    }
}

enum ScriptFile {
    /// A missing or unreadable script is a usage error (exit 2), not a script error.
    static func checkReadable(_ path: String) throws {
        guard let file = fopen(path, "r") else {
            let reason = String(cString: strerror(errno))
            throw ValidationError("cannot read '\(path)': \(reason); give the path of a Lua script")
        }
        fclose(file)
    }
}
