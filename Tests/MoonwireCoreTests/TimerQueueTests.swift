import MoonwireCore
import NIOCore
import NIOPosix
import Testing

@Suite struct TimerQueueTests {
    @Test func popsByDeadlineThenInsertionOrder() {
        var q = TimerQueue<String>()
        let base = NIODeadline.uptimeNanoseconds(1_000)
        q.insert("late", at: base + .nanoseconds(30))
        q.insert("tie-1", at: base + .nanoseconds(10))
        q.insert("early", at: base)
        q.insert("tie-2", at: base + .nanoseconds(10))
        q.insert("tie-3", at: base + .nanoseconds(10))
        #expect(q.popFirst(dueBy: base - .nanoseconds(1)) == nil)
        var out: [String] = []
        while let e = q.popFirst(dueBy: base + .nanoseconds(100)) { out.append(e) }
        #expect(out == ["early", "tie-1", "tie-2", "tie-3", "late"])
        #expect(q.isEmpty)
    }

    @Test func manyRandomDeadlinesComeOutSorted() {
        var q = TimerQueue<Int>()
        var rng = SystemRandomNumberGenerator()
        let deadlines = (0..<2_000).map { _ in UInt64.random(in: 0..<500, using: &rng) }
        for (i, d) in deadlines.enumerated() { q.insert(i, at: .uptimeNanoseconds(d)) }
        var previous: (UInt64, Int) = (0, -1)
        while let i = q.popFirst(dueBy: .uptimeNanoseconds(1_000)) {
            let current = (deadlines[i], i)
            #expect(current.0 > previous.0 || (current.0 == previous.0 && current.1 > previous.1))
            previous = current
        }
    }
}

@Suite struct TimerSchedulerTests {
    @Test func firesInOrderAndHonoursCancel() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        let fired = try loop.flatSubmit { () -> EventLoopFuture<[String]> in
            let timers = TimerScheduler(eventLoop: loop)
            let done = loop.makePromise(of: [String].self)
            var order: [String] = []
            timers.schedule(after: .milliseconds(20)) { order.append("b") }
            let cancelled = timers.schedule(after: .milliseconds(10)) { order.append("never") }
            timers.schedule(after: .milliseconds(5)) { order.append("a") }
            var ticks = 0
            timers.schedule(after: .milliseconds(3), every: .milliseconds(3)) {
                ticks += 1
                if ticks == 3 { order.append("tick3") }
            }
            timers.schedule(after: .milliseconds(30)) {
                order.append("c")
                timers.cancelAll()
                done.succeed(order)
            }
            #expect(timers.cancel(cancelled))
            #expect(!timers.cancel(cancelled))
            return done.futureResult
        }.wait()
        #expect(fired.filter { $0 != "tick3" } == ["a", "b", "c"])
        #expect(fired.contains("tick3"))
    }
}
