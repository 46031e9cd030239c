import Logging
import MoonwireCore
import NIOCore
import NIOPosix
import Testing

@testable import MoonwireLua

/// Runs Lua source in a real ScriptRuntime on a real event loop and lets a test
/// read the script's globals afterwards.
final class ScriptHarness: @unchecked Sendable {
    let runtime: ScriptRuntime
    private(set) var errors: [String] = []

    /// No callback timeout unless a test asks for one: stress loops in a main
    /// chunk run far slower under AddressSanitizer.
    init(keepGoing: Bool = false, limits: ScriptLimits = .init(callbackTimeout: 0)) {
        // A loop of its own, so that a test busy in Lua does not delay another's timers.
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let logger = Logger(label: "test") { _ in MoonwireLogHandler(level: .error, format: .text, colors: false) }
        let errorsBox = ErrorBox()
        runtime = ScriptRuntime(
            eventLoop: loop,
            options: .init(keepGoing: keepGoing, logger: logger, reportError: { errorsBox.messages.append($0) }, limits: limits)
        )
        self.errorBox = errorsBox
    }

    private let errorBox: ErrorBox
    private let group: MultiThreadedEventLoopGroup

    deinit {
        group.shutdownGracefully { _ in }
    }

    var reported: [String] { errorBox.messages }

    /// Runs the chunk to its end; the exit code. A script still running after
    /// `deadline` seconds fails the test instead of hanging it.
    @discardableResult
    func run(_ source: String, name: String = "test.lua", arguments: [String] = [], deadline: Int64 = 60) throws -> Int32 {
        try Self.bounded(runtime.run(source: source, chunkName: name, arguments: arguments), seconds: deadline)
    }

    /// A global of the script, copied into Swift.
    func global(_ name: String) throws -> LuaValue {
        try Self.bounded(runtime.eventLoop.submit { [runtime] in
            let lua = runtime.lua
            lua.getGlobal(name)
            defer { lua.pop() }
            return try lua.value(at: -1)
        })
    }

    /// Runs `body` on the loop with the main stack.
    func onLoop<T>(_ body: @escaping (LuaState) throws -> T) throws -> T {
        try Self.bounded(runtime.eventLoop.submit { [runtime] in try body(runtime.lua) })
    }

    /// The deadlines' own loop: a callback spinning on the script's loop (what the
    /// watchdog tests provoke) cannot hold back the timer that fails the test.
    private static let deadlines = MultiThreadedEventLoopGroup(numberOfThreads: 1).next()

    /// Waits for `future` at most `seconds`, then fails with HarnessTimeout.
    static func bounded<T>(_ future: EventLoopFuture<T>, seconds: Int64 = 60) throws -> T {
        let result = deadlines.makePromise(of: T.self)
        let timer = deadlines.scheduleTask(in: .seconds(seconds)) { result.fail(HarnessTimeout(seconds: seconds)) }
        future.whenComplete { outcome in
            timer.cancel()
            result.completeWith(outcome)
        }
        return try result.futureResult.wait()
    }
}

final class ErrorBox: @unchecked Sendable {
    var messages: [String] = []
}

extension LuaValue {
    /// The elements 1...n of a sequence table.
    var sequence: [LuaValue] {
        guard case .table(let t) = self else { return [] }
        var out: [LuaValue] = []
        var i: Int64 = 1
        while let v = t[.integer(i)] {
            out.append(v)
            i += 1
        }
        return out
    }

    var text: String? {
        if case .string(let b) = self { return String(decoding: b, as: UTF8.self) }
        return nil
    }

    var double: Double? {
        switch self {
        case .number(let d): return d
        case .integer(let i): return Double(i)
        default: return nil
        }
    }
}

struct HarnessTimeout: Error, CustomStringConvertible {
    let seconds: Int64
    var description: String { "the script still ran after \(seconds) s" }
}
