import CLua
import CLuaShim
import Dispatch
import Foundation
import Logging
import MoonwireCore
import NIOCore

/// The outcome of one test of `moonwire test`.
public struct TestCaseResult: Sendable, Equatable {
    public enum Status: String, Sendable {
        /// `failed`: an assertion failed; `error`: anything else ended the test
        /// (a Lua error, misuse of the API, its timeout, an error in a callback).
        case passed, failed, error, skipped
    }

    /// Describe blocks and the test's name, joined by spaces.
    public var name: String
    public var status: Status
    /// Seconds, hooks included.
    public var duration: Double
    /// For failures and errors: `file:line: message` as the assertion or error gave it.
    public var message: String
    public var traceback: String
    /// Where the test is declared: `file:line`.
    public var location: String
    /// The test's own name, without its describe blocks'.
    public var title: String

    public init(name: String, status: Status, duration: Double, message: String, traceback: String, location: String, title: String? = nil) {
        self.title = title ?? name
        self.name = name
        self.status = status
        self.duration = duration
        self.message = message
        self.traceback = traceback
        self.location = location
    }
}

/// Runs one test file in a Lua state of its own, with busted's vocabulary and
/// luassert (resources/test_runner.lua), on one event loop.
///
/// A test that never yields (an endless loop) is stopped by a watchdog: past
/// its timeout a count hook raises an error in whatever Lua code is running.
///
/// The file's state ends only when its runner is done (not when nothing is
/// open between two tests); then what the file left open is closed and waited
/// for (`ScriptRuntime.finish`) before the future completes.
///
/// ```swift
/// let results = try TestFileRunner(eventLoop: loop, logger: logger)
///     .run(file: "tests/chat_test.lua", options: .init(timeout: 10)).wait()
/// ```
public final class TestFileRunner: @unchecked Sendable {
    /// How one file runs.
    public struct Options: Sendable {
        /// A Lua pattern on the full test name; empty runs every test.
        public var filter = ""
        /// Seconds per test, hooks included.
        public var timeout: Double = 10
        /// Seeds `math.random` before the file runs (and so the order `shuffle` picks).
        public var seed: UInt32?
        /// Runs the tests of each `describe` in a random order.
        public var shuffle = false
        /// Stops at the first test that fails or errs (teardown hooks still run).
        public var failFast = false
        /// Reports the tests (as skipped) without running any.
        public var list = false
        /// Runs only the tests with one of these `#tags` in their full name (none: all).
        public var tags: [String] = []
        /// Leaves out the tests with one of these `#tags` in their full name.
        public var excludeTags: [String] = []
        /// A Lua file run in each file's state before the file (busted's `--helper`).
        public var helper = ""
        /// Put before `package.path` and `package.cpath` (busted's `--lpath`, `--cpath`).
        public var lpath = ""
        public var cpath = ""
        /// Runs every file on a virtual clock (`--virtual-time`); a file can ask for it
        /// alone with the comment line `-- moonwire: virtual-time` at its top.
        public var virtualTime = false

        public init(filter: String = "", timeout: Double = 10, seed: UInt32? = nil, shuffle: Bool = false, failFast: Bool = false, list: Bool = false) {
            self.filter = filter
            self.timeout = timeout
            self.seed = seed
            self.shuffle = shuffle
            self.failFast = failFast
            self.list = list
        }
    }

    private var runtime: ScriptRuntime!
    private let uncaught = UncaughtErrors()
    private var results: [TestCaseResult] = []
    private var watchdogTimer: DispatchSourceTimer?
    /// The runner's function that ends the running test when a callback raised.
    private var onUncaught: LuaReference?

    /// `memoryLimit`: bytes the file's Lua state may hold (nil: the default, 0: none);
    /// `sendBudget`: bytes its connections may hold waiting to be sent, together.
    public init(eventLoop: EventLoop, logger: Logger, memoryLimit: Int? = nil, sendBudget: Int? = nil) {
        let uncaught = self.uncaught
        runtime = ScriptRuntime(
            eventLoop: eventLoop,
            options: .init(keepGoing: true, logger: logger, reportError: { message in
                uncaught.messages.append(message)
                uncaught.notify?()
            }, limits: ScriptLimits(memory: memoryLimit, callbackWarning: 0, callbackTimeout: 0, sendBudget: sendBudget))
        )
        runtime.heldOpen = true
        // Called while the callback's error unwinds: tell the runner on a clean stack.
        uncaught.notify = { [weak self, eventLoop] in
            eventLoop.execute { self?.notifyUncaught() }
        }
    }

    deinit {
        watchdogTimer?.cancel()
    }

    /// Runs the file's tests.
    public func run(file: String, options: Options) -> EventLoopFuture<[TestCaseResult]> {
        runtime.eventLoop.flatSubmit { [self] in
            if options.virtualTime || Self.asksForVirtualTime(file) { runtime.clock.makeVirtual() }
            installTestHost()
            return runtime.run(
                chunk: PackageResources.test_runner_lua, name: "@moonwire/test_runner.lua", scriptName: file,
                arguments: [
                    file, options.filter, String(options.timeout), options.seed.map { String($0) } ?? "",
                    options.shuffle ? "1" : "0", options.failFast ? "1" : "0", options.list ? "1" : "0",
                    options.tags.joined(separator: ","), options.excludeTags.joined(separator: ","),
                    options.helper, options.lpath, options.cpath,
                ]
            ).flatMapError { error in
                self.runtime.eventLoop.makeFailedFuture(error)
            }.map { _ in
                self.watchdog(arm: nil)
                return self.results
            }
        }
    }

    /// Its functions in `mw._test_host`, registered: the trampolines' contexts.
    private var functionEntries: [LuaFunctionEntry] = []

    /// The pragma that puts one file on a virtual clock: a comment line
    /// `-- moonwire: virtual-time` among the comment lines the file starts with.
    static let virtualTimePragma = "moonwire: virtual-time"

    /// Whether `file` starts with comment lines of which one is the pragma.
    static func asksForVirtualTime(_ file: String) -> Bool {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return false }
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || (index == 0 && trimmed.hasPrefix("#!")) { continue }
            guard trimmed.hasPrefix("--") else { return false }
            if trimmed.dropFirst(2).trimmingCharacters(in: .whitespaces) == virtualTimePragma { return true }
        }
        return false
    }

    private func notifyUncaught() {
        guard let onUncaught, !runtime.finished else { return }
        runtime.lua.push(onUncaught)
        runtime.callIntoLua(arguments: 0)
    }

    /// `mw._test_host`: the prelude's internals plus the functions below.
    private func installTestHost() {
        runtime.installPreludeHost(named: "_test_host", Self.functions, owner: self, keeping: &functionEntries)
    }

    /// The test runner's own functions in `mw._test_host`; their errors name them bare.
    private static let functions = LuaFunctions<TestFileRunner>.functions(of: "test_host", [
        LuaFunction("report", shownAs: "report") { runner, args in
            let status = TestCaseResult.Status(rawValue: try args.string(2)) ?? .failed
            runner.results.append(TestCaseResult(
                name: try args.string(1), status: status, duration: try args.number(3),
                message: try args.string(4), traceback: try args.string(5), location: try args.string(6),
                title: try args.string(7)
            ))
            return 0
        },
        LuaFunction("watchdog", shownAs: "watchdog") { runner, args in
            runner.watchdog(arm: args.boolean(1) ? try args.number(2) : nil)
            return 0
        },
        LuaFunction("on_uncaught", shownAs: "on_uncaught") { runner, args in
            try args.function(1)
            args.lua.pushValue(args.index(1))
            runner.onUncaught = args.lua.reference()
            return 0
        },
        LuaFunction("explain_error", shownAs: "explain_error") { runner, args in
            args.lua.push(runner.runtime.explainingMemoryLimit(try args.string(1)))
            return 1
        },
        // The per-test timeout and the durations reported: real time, under a virtual clock too.
        LuaFunction("wall_after", shownAs: "wall_after") { runner, args in
            try runner.runtime.schedule(args, repeating: false, on: runner.runtime.wallTimers)
        },
        LuaFunction("wall_now", shownAs: "wall_now") { _, args in
            args.lua.push(Double(NIODeadline.now().uptimeNanoseconds) / 1e9)
            return 1
        },
        LuaFunction("take_uncaught", shownAs: "take_uncaught") { runner, args in
            let messages = runner.uncaught.messages
            runner.uncaught.messages.removeAll()
            if messages.isEmpty { args.lua.pushNil() } else { args.lua.push(messages.joined(separator: "\n")) }
            return 1
        },
    ])

    /// Arms the watchdog a second past the test's own timeout (which a timer on
    /// the loop enforces while the loop is free), or disarms it.
    private func watchdog(arm timeout: Double?) {
        watchdogTimer?.cancel()
        watchdogTimer = nil
        mw_guard_clear_interrupt(runtime.vm.guardState)
        guard let timeout else { return }
        let timer = DispatchSource.makeTimerSource(queue: .global())
        // deinit cancels the timer before the state (and its guard) goes.
        let state = runtime.vm.guardState
        timer.schedule(deadline: .now() + timeout + 1)
        timer.setEventHandler { mw_guard_interrupt(state, Int32(MW_INTERRUPT_TIMEOUT)) }
        timer.resume()
        watchdogTimer = timer
    }
}

/// Errors from callbacks while a test runs; the runner fails that test with them.
final class UncaughtErrors: @unchecked Sendable {
    var messages: [String] = []
    var notify: (() -> Void)?
}
