@testable import MoonwireCore
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

    @Test func removeAllKeepsTheOthersInOrder() {
        var q = TimerQueue<Int>()
        for i in 0..<100 { q.insert(i, at: .uptimeNanoseconds(UInt64(1_000 - i % 10))) }
        q.removeAll { $0 % 3 == 0 }
        #expect(q.count == 66)
        var out: [Int] = []
        while let i = q.popFirst(dueBy: .uptimeNanoseconds(2_000)) { out.append(i) }
        let expected = (0..<100).filter { $0 % 3 != 0 }.sorted { (10 - $0 % 10, $0) < (10 - $1 % 10, $1) }
        #expect(out == expected)
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
        let (loop, clock, timers) = virtualTimers()
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

    /// A wait with a timeout for every message (`c:receive(30)`), each timer cancelled when
    /// its message comes, behind a live timer due first (a script's `mw.every`): the
    /// cancelled entries used to stay queued until their own deadline, one per message.
    @Test func cancelledTimersDoNotPileUpBehindALiveOne() {
        let (loop, clock, timers) = virtualTimers()
        var ticks = 0
        timers.schedule(after: .milliseconds(1), every: .milliseconds(1)) { ticks += 1 }
        var maxQueued = 0
        for _ in 0..<10_000 {
            timers.cancel(timers.schedule(after: .seconds(30)) { Issue.record("a cancelled timer fired") })
            maxQueued = max(maxQueued, timers.queuedCount)
        }
        #expect(timers.count == 1)
        #expect(maxQueued <= 2 * timers.count + TimerScheduler.staleSlack + 1)
        clock.now = clock.now + .milliseconds(1)
        loop.advanceTime(to: clock.now)
        #expect(ticks == 1)
        clock.now = clock.now + .seconds(31)
        loop.advanceTime(to: clock.now)
        #expect(ticks == 2)  // missed ticks are skipped; no cancelled timer fired
    }

    /// Once the last live timer is cancelled nothing stays armed on the loop (a pending
    /// task makes the loop read the clock on every tick).
    @Test func cancellingTheLastTimerDisarmsTheLoop() {
        let (loop, clock, timers) = virtualTimers()
        let a = timers.schedule(after: .seconds(120)) { Issue.record("cancelled") }
        let b = timers.schedule(after: .seconds(60)) { Issue.record("cancelled") }
        #expect(timers.isArmed)
        timers.cancel(b)
        #expect(timers.isArmed)
        timers.cancel(a)
        #expect(!timers.isArmed)
        #expect(timers.queuedCount == 0)
        var fired = false
        timers.schedule(after: .seconds(1)) { fired = true }
        clock.now = clock.now + .seconds(1)
        loop.advanceTime(to: clock.now)
        #expect(fired)
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

/// A scheduler on an embedded loop whose time is `clock`'s, which the test moves.
private func virtualTimers() -> (EmbeddedEventLoop, VirtualClock, TimerScheduler) {
    let loop = EmbeddedEventLoop()
    let clock = VirtualClock()
    return (loop, clock, TimerScheduler(eventLoop: loop, now: { clock.now }))
}

extension UInt64 {
    var asMilliseconds: Int64 { Int64(self / 1_000_000) }
}
