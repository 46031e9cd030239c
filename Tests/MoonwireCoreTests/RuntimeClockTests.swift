import MoonwireCore
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

/// The jump rule of the virtual clock alone (``QuiescenceGate``), then the clock on an
/// embedded loop (its checks are scheduled tasks the test steps through), then on a real
/// loop with real loopback sockets.
@Suite(.timeLimit(.minutes(5))) struct QuiescenceGateTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func jumpsOnlyAfterTwoQuietTicks() {
        var gate = QuiescenceGate(stallLimit: .seconds(1))
        let answers = [
            gate.allowsJump(activity: 5, ticks: 10, pendingIO: 0, realNow: t0),  // first look: a change
            gate.allowsJump(activity: 5, ticks: 10, pendingIO: 0, realNow: t0),  // same tick
            gate.allowsJump(activity: 5, ticks: 11, pendingIO: 0, realNow: t0),  // one quiet tick
            gate.allowsJump(activity: 5, ticks: 12, pendingIO: 0, realNow: t0),  // two
        ]
        #expect(answers == [false, false, false, true])
    }

    @Test func anyActivityStartsTheCountAgain() {
        var gate = QuiescenceGate(stallLimit: .seconds(1))
        let answers = [
            gate.allowsJump(activity: 1, ticks: 0, pendingIO: 0, realNow: t0),
            gate.allowsJump(activity: 2, ticks: 5, pendingIO: 0, realNow: t0),  // bytes moved
            gate.allowsJump(activity: 2, ticks: 6, pendingIO: 0, realNow: t0),
            gate.allowsJump(activity: 2, ticks: 7, pendingIO: 0, realNow: t0),
        ]
        #expect(answers == [false, false, false, true])
    }

    @Test func outstandingIOHoldsTheClockUntilItStalls() {
        var gate = QuiescenceGate(stallLimit: .seconds(1))
        let answers = [
            gate.allowsJump(activity: 1, ticks: 0, pendingIO: 1, realNow: t0),
            gate.allowsJump(activity: 1, ticks: 50, pendingIO: 1, realNow: t0 + .milliseconds(999)),
            gate.allowsJump(activity: 1, ticks: 51, pendingIO: 1, realNow: t0 + .seconds(1)),  // stalled
            gate.allowsJump(activity: 1, ticks: 52, pendingIO: 0, realNow: t0 + .seconds(1)),
        ]
        #expect(answers == [false, false, true, true])
    }
}

@Suite(.timeLimit(.minutes(5))) struct RuntimeClockTests {
    /// Steps an embedded loop's real time until `done` or 10 000 steps.
    private func step(_ loop: EmbeddedEventLoop, until done: () -> Bool) {
        var steps = 0
        while !done(), steps < 10_000 {
            loop.advanceTime(by: .microseconds(50))
            steps += 1
        }
    }

    private func virtualClock() -> (EmbeddedEventLoop, RuntimeClock) {
        let loop = EmbeddedEventLoop()
        let clock = RuntimeClock(eventLoop: loop)
        clock.makeVirtual()
        return (loop, clock)
    }

    @Test func realClockIsTheLoopsOwn() {
        let loop = EmbeddedEventLoop()
        let clock = RuntimeClock(eventLoop: loop)
        #expect(!clock.isVirtual)
        var fired = false
        let before = NIODeadline.now()
        #expect(clock.now() >= before)
        // The loop's own scheduled task: at the embedded loop's (not the clock's) time.
        _ = clock.scheduleTask(on: loop, deadline: loop.now + .seconds(30)) { fired = true }
        loop.advanceTime(by: .seconds(29))
        #expect(!fired)
        loop.advanceTime(by: .seconds(1))
        #expect(fired)
        #expect(RuntimeClock.of(loop) === RuntimeClock.real)
    }

    @Test func virtualClockJumpsInDeadlineOrderAndReadsExactly() {
        let (loop, clock) = virtualClock()
        #expect(clock.seconds == 0)
        var seen: [String] = []
        func at(_ s: Int64, _ name: String) {
            _ = clock.scheduleTask(on: loop, in: .seconds(s)) { seen.append("\(name)@\(clock.seconds)") }
        }
        at(16, "d")
        at(1, "a")
        at(2, "b1")
        at(2, "b2")
        let cancelled = clock.scheduleTask(on: loop, in: .seconds(4)) { seen.append("cancelled") }
        cancelled.cancel()
        at(30, "e")
        step(loop) { seen.count == 5 }
        #expect(seen == ["a@1.0", "b1@2.0", "b2@2.0", "d@16.0", "e@30.0"])
        #expect(clock.jumps == 4)  // 1, 2, 16, 30: the cancelled 4 is never jumped to
    }

    @Test func taskScheduledForNowRunsWithoutAJump() {
        let (loop, clock) = virtualClock()
        var fired = false
        _ = clock.scheduleTask(on: loop, in: .zero) { fired = true }
        loop.run()
        #expect(fired)
        #expect(clock.jumps == 0)
        #expect(clock.seconds == 0)
    }

    @Test func outstandingIOHoldsVirtualTime() {
        let (loop, clock) = virtualClock()
        var fired = false
        _ = clock.scheduleTask(on: loop, in: .seconds(5)) { fired = true }
        clock.beginIO()  // a dial under way
        loop.advanceTime(by: .milliseconds(500))
        #expect(!fired)
        #expect(clock.seconds == 0)
        clock.endIO()
        step(loop) { fired }
        #expect(fired)
        #expect(clock.seconds == 5)
    }

    @Test func activityHoldsVirtualTimeUntilTheLoopIsQuiet() {
        let (loop, clock) = virtualClock()
        var fired = false
        _ = clock.scheduleTask(on: loop, in: .seconds(5)) { fired = true }
        // Bytes keep moving (a chatty peer): no jump however many checks pass.
        for _ in 0..<200 {
            clock.noteActivity()
            loop.advanceTime(by: .microseconds(50))
        }
        #expect(!fired)
        step(loop) { fired }
        #expect(clock.seconds == 5)
    }

    /// On a real loop with the tick counter, over real loopback sockets: a server that
    /// echoes after the client's timer; the echo is read at the same virtual instant
    /// (no jump while the bytes are in flight), and the next timer comes after it.
    @Test func realSocketsFinishTheirExchangeBeforeTheNextJump() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1, metricsDelegate: LoopTicks())
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        let clock = RuntimeClock(eventLoop: loop)
        let log = NIOLockedValueBox<[String]>([])
        let done = loop.makePromise(of: Void.self)
        let server = try loop.submit {
            clock.makeVirtual()
            clock.install()
        }.flatMap {
            ServerBootstrap(group: loop).childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try ClockProbe.attach(to: channel)
                    try channel.pipeline.syncOperations.addHandler(Echo())
                }
            }.bind(host: "127.0.0.1", port: 0)
        }.wait()
        defer { try? server.close().wait() }
        let port = try #require(server.localAddress?.port)
        try loop.flatSubmit {
            ClientBootstrap(group: loop).channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try ClockProbe.attach(to: channel)
                    try channel.pipeline.syncOperations.addHandler(Recorder(clock: clock, log: log, done: done))
                }
            }.connect(host: "127.0.0.1", port: port)
        }.flatMap { channel in
            loop.submit {
                // The echo of each message must come back before the clock moves on.
                for s in [1, 2, 3] as [Int64] {
                    _ = clock.scheduleTask(on: loop, in: .seconds(s)) {
                        log.withLockedValue { $0.append("send \(s) at \(clock.seconds)") }
                        channel.writeAndFlush(ByteBuffer(string: "\(s)"), promise: nil)
                    }
                }
                _ = clock.scheduleTask(on: loop, in: .seconds(4)) { done.succeed(()) }
            }
        }.wait()
        // A lost event fails the test after 30 s of real time instead of hanging it.
        let deadline = loop.scheduleTask(in: .seconds(30)) { done.fail(ChannelError.connectTimeout(.seconds(30))) }
        defer { deadline.cancel() }
        try done.futureResult.wait()
        let lines: [String] = log.withLockedValue { Array($0) }
        #expect(lines == [
            "send 1 at 1.0", "echo 1 at 1.0", "send 2 at 2.0", "echo 2 at 2.0", "send 3 at 3.0", "echo 3 at 3.0",
        ])
    }
}

private final class Echo: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.writeAndFlush(data, promise: nil)
    }
}

private final class Recorder: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    let clock: RuntimeClock
    let log: NIOLockedValueBox<[String]>
    let done: EventLoopPromise<Void>
    init(clock: RuntimeClock, log: NIOLockedValueBox<[String]>, done: EventLoopPromise<Void>) {
        self.clock = clock
        self.log = log
        self.done = done
    }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let text = String(buffer: unwrapInboundIn(data))
        log.withLockedValue { $0.append("echo \(text) at \(clock.seconds)") }
    }
}
