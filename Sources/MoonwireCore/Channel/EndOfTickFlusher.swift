import NIOCore
import NIOPosix

/// A channel handler that ``FlushBatching`` flushes at the end of a loop tick.
protocol EndOfTickFlushing: AnyObject {
    /// Calls `scheduledFlushRuns()` on its ``FlushBatching`` and flushes.
    func flushAtEndOfTick()
}

/// The end-of-tick flushes of one event-loop thread: one task per tick flushes every
/// handler that wrote outside a read, in the order they wrote, instead of a task per
/// handler (a script sending once on each of 10 000 connections would queue 10 000).
/// Used on its loop only.
final class EndOfTickFlusher: LoopLocal {
    // One per loop thread; an embedded loop runs on its caller's thread, hence the check
    // of the loop in `shared(on:)` (a flush task left on an embedded loop that never runs
    // again must not hold up another loop's handlers).
    static let perThread = ThreadSpecificVariable<EndOfTickFlusher>()
    let loop: EventLoop
    private var pending: [any EndOfTickFlushing] = []
    private var spare: [any EndOfTickFlushing] = []
    private var scheduled = false
    /// Inside ``flushing(after:)``: a write needs no task, the batch flushes at its end.
    private var holding = 0

    init(loop: EventLoop) {
        self.loop = loop
    }

    func add(_ handler: any EndOfTickFlushing) {
        self.pending.append(handler)
        guard !self.scheduled, self.holding == 0 else { return }
        self.scheduled = true
        self.loop.assumeIsolated().execute { self.run() }
    }

    /// Runs `body`, a batch of work that is a loop task of its own (``TimerScheduler``'s
    /// due timers), and flushes what it wrote when it ends, instead of queueing one more
    /// task on the loop to do so: with heartbeats due one by one on thousands of
    /// connections, that task was one per ping.
    func flushing(after body: () -> Void) {
        self.holding += 1
        body()
        self.holding -= 1
        if self.holding == 0, !self.scheduled, !self.pending.isEmpty { self.run() }
    }

    private func run() {
        self.scheduled = false
        // A handler that writes again while flushing lands in the next tick's list.
        swap(&self.pending, &self.spare)
        for handler in self.spare { handler.flushAtEndOfTick() }
        self.spare.removeAll(keepingCapacity: self.spare.count <= 4096)
    }
}
