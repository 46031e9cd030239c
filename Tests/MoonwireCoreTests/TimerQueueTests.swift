import MoonwireCore
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

@Suite(.timeLimit(.minutes(5))) struct TimerQueueTests {
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

@Suite(.timeLimit(.minutes(5))) struct TimerSchedulerTests {
    /// Virtual time: every tick of a repeating timer is due at start + n * interval,
    /// however long each callback takes, so lateness never adds up; ticks missed
    /// entirely are skipped, not fired in a burst.
    @Test func repeatingTimersAreAnchoredAndDoNotDrift() {
        let loop = EmbeddedEventLoop()
        let clock = VirtualClock()
        let timers = TimerScheduler(eventLoop: loop, now: { clock.now })
        var fired: [Int64] = []
        let first = timers.schedule(after: .milliseconds(10), every: .milliseconds(10)) {
            fired.append(clock.now.uptimeNanoseconds.asMilliseconds)
            clock.now = clock.now + .milliseconds(3)   // the callback takes 3 ms
        }
        for _ in 0..<100 {
            // The loop wakes exactly at the armed deadline.
            let next = clock.now + .milliseconds(10 - Int64(clock.now.uptimeNanoseconds.asMilliseconds % 10))
            clock.now = next
            loop.advanceTime(to: next)
        }
        #expect(fired.count == 100)
        #expect(fired == (1...100).map { Int64($0 * 10) })
        timers.cancel(first)

        // A callback that overruns two intervals: the next tick fires late once
        // (at 35 ms), the one after it is skipped, then the cadence resumes.
        var late: [Int64] = []
        let start = clock.now
        let id = timers.schedule(after: .milliseconds(10), every: .milliseconds(10)) {
            late.append((clock.now - start).nanoseconds / 1_000_000)
            if late.count == 1 { clock.now = clock.now + .milliseconds(25) }
        }
        for step in 1...5 {
            let target = start + .milliseconds(Int64(step) * 10)
            if clock.now < target { clock.now = target }
            loop.advanceTime(to: clock.now)
        }
        timers.cancel(id)
        #expect(late == [10, 35, 40, 50])
    }

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

final class VirtualClock: @unchecked Sendable {
    var now = NIODeadline.uptimeNanoseconds(0)
}

extension UInt64 {
    var asMilliseconds: Int64 { Int64(self / 1_000_000) }
}
