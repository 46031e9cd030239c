import CLua
import CLuaShim
import Dispatch
import Logging
import MoonwireCore
import NIOCore

/// The outcome of one test of `moonwire test`.
public struct TestCaseResult: Sendable, Equatable {
    public enum Status: String, Sendable {
        case passed, failed, skipped
    }

    /// Describe blocks and the test's name, joined by spaces.
    public var name: String
    public var status: Status
    /// Seconds, hooks included.
    public var duration: Double
    /// For failures: `file:line: message` as the assertion or error gave it.
    public var message: String
    public var traceback: String
    /// Where the test is declared: `file:line`.
    public var location: String

    public init(name: String, status: Status, duration: Double, message: String, traceback: String, location: String) {
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
/// ```swift
/// let results = try TestFileRunner(eventLoop: loop, logger: logger)
///     .run(file: "tests/chat_test.lua", filter: "", timeout: 10).wait()
/// ```
public final class TestFileRunner: @unchecked Sendable {
    private var runtime: ScriptRuntime!
    private let uncaught = UncaughtErrors()
    private var results: [TestCaseResult] = []
    private let watchdogFlag = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
    private var watchdogTimer: DispatchSourceTimer?

    public init(eventLoop: EventLoop, logger: Logger) {
        watchdogFlag.initialize(to: 0)
        let uncaught = self.uncaught
        runtime = ScriptRuntime(
            eventLoop: eventLoop,
            options: .init(keepGoing: true, logger: logger, reportError: { uncaught.messages.append($0) })
        )
    }

    deinit {
        watchdogTimer?.cancel()
        // Every Lua thread holds the flag's address: close the state before freeing it.
        runtime = nil
        watchdogFlag.deallocate()
    }

    /// Runs the file's tests in order; `filter` is a Lua pattern on the full test name.
    public func run(file: String, filter: String, timeout: Double) -> EventLoopFuture<[TestCaseResult]> {
        runtime.eventLoop.flatSubmit { [self] in
            installTestHost()
            return runtime.run(
                chunk: PackageResources.test_runner_lua, name: "@moonwire/test_runner.lua", scriptName: file,
                arguments: [file, filter, String(timeout)]
            ).flatMapError { error in
                self.runtime.eventLoop.makeFailedFuture(error)
            }.map { _ in
                self.watchdog(arm: nil)
                return self.results
            }
        }
    }

    private var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// `mw._test_host`: the prelude's internals plus the functions below.
    private func installTestHost() {
        let lua = runtime.lua
        guard let internals = runtime.preludeInternals else { return }
        mw_watchdog_install(lua.L, watchdogFlag)
        lua.getGlobal("mw")
        lua.push(internals)
        for (name, function) in Self.functions {
            lua.push(function: function, context: context)
            lua.setField(name, table: -2)
        }
        lua.setField("_test_host", table: -2)
        lua.pop()
    }

    private static let functions: [(String, mw_swift_fn)] = [
        ("report", { L, ctx in
            LuaBinding.enter(L, ctx, "report", as: TestFileRunner.self) { runner, args in
                let status = TestCaseResult.Status(rawValue: try args.string(2)) ?? .failed
                runner.results.append(TestCaseResult(
                    name: try args.string(1), status: status, duration: try args.number(3),
                    message: try args.string(4), traceback: try args.string(5), location: try args.string(6)
                ))
                return 0
            }
        }),
        ("watchdog", { L, ctx in
            LuaBinding.enter(L, ctx, "watchdog", as: TestFileRunner.self) { runner, args in
                runner.watchdog(arm: args.lua.boolean(at: 1) ? try args.number(2) : nil)
                return 0
            }
        }),
        ("take_uncaught", { L, ctx in
            LuaBinding.enter(L, ctx, "take_uncaught", as: TestFileRunner.self) { runner, args in
                let messages = runner.uncaught.messages
                runner.uncaught.messages.removeAll()
                if messages.isEmpty { args.lua.pushNil() } else { args.lua.push(messages.joined(separator: "\n")) }
                return 1
            }
        }),
    ]

    /// Arms the watchdog a second past the test's own timeout (which a timer on
    /// the loop enforces while the loop is free), or disarms it.
    private func watchdog(arm timeout: Double?) {
        watchdogTimer?.cancel()
        watchdogTimer = nil
        mw_watchdog_reset(watchdogFlag)
        guard let timeout else { return }
        let timer = DispatchSource.makeTimerSource(queue: .global())
        let flag = watchdogFlag
        timer.schedule(deadline: .now() + timeout + 1)
        timer.setEventHandler { mw_watchdog_trigger(flag) }
        timer.resume()
        watchdogTimer = timer
    }
}

/// Errors from callbacks while a test runs; the runner fails that test with them.
final class UncaughtErrors: @unchecked Sendable {
    var messages: [String] = []
}
