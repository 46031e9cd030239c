import Logging
import MoonwireCore
@_spi(Benchmarks) import MoonwireLua
import NIOCore
import NIOPosix

/// The cost of delivering one message to a Lua `on_message` callback: the path from the
/// core's delegate call (what the channel handler triggers when a whole message arrived)
/// through the prelude's dispatcher to the script's function, without the socket read
/// around it.
///
/// A script listens on loopback and connects to itself, so the connection is a real open
/// one; then the benchmark hands it `iterations` messages on its loop.
enum DispatchBenchmark {
    struct Result {
        /// Nanoseconds per message, callback included.
        var nanosecondsPerMessage: Double
        /// How many messages the callback counted (equals the iterations).
        var delivered: Int
    }

    static let script = """
        local s = assert(mw.listen("ws://127.0.0.1:0/"))
        local c = mw.connect(s:url(), { heartbeat = false, reconnect = false })
        count = 0
        c:on_message(function(conn, msg, kind) count = count + 1 end)
        """

    static func run(iterations: Int, size: Int = 32) throws -> Result {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let runtime = ScriptRuntime(eventLoop: loop, options: .init(logger: Logger(label: "bench")))
        _ = runtime.run(source: script, chunkName: "=dispatch")
        let message = ByteBuffer(repeating: UInt8(ascii: "a"), count: size)
        try waitForOpenConnection(runtime)
        let elapsed = try loop.submit { () -> Double in
            let start = NIODeadline.now()
            _ = runtime.deliverToOpenConnection(message, kind: .binary, times: iterations)
            return Double((NIODeadline.now() - start).nanoseconds)
        }.wait()
        let delivered = try loop.submit { () -> Int in
            runtime.luaState.getGlobal("count")
            defer { runtime.luaState.pop() }
            return runtime.luaState.integer(at: -1) ?? 0
        }.wait()
        try loop.submit { runtime.shutdown(signal: 15) }.wait()
        // The connection refers back to the runtime (unowned): keep it until the
        // loop, and the closes the shutdown started, have stopped.
        withExtendedLifetime(runtime) { try? group.syncShutdownGracefully() }
        return Result(nanosecondsPerMessage: elapsed / Double(iterations), delivered: delivered)
    }

    /// Waits until the script's connection is open (a zero-message delivery says so).
    private static func waitForOpenConnection(_ runtime: ScriptRuntime) throws {
        let deadline = NIODeadline.now() + TimeAmount.milliseconds(10_000)
        while NIODeadline.now() < deadline {
            if try runtime.eventLoop.submit({ runtime.deliverToOpenConnection(ByteBuffer(), kind: .binary, times: 0) }).wait() {
                return
            }
            try runtime.eventLoop.scheduleTask(in: .milliseconds(5)) {}.futureResult.wait()
        }
        throw BenchmarkError(description: "the dispatch benchmark's connection did not open")
    }

    struct BenchmarkError: Error, CustomStringConvertible {
        var description: String
    }
}
