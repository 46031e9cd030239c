import NIOCore
import NIOPosix

/// One-shot and repeating timers on one event loop, fired in deadline order.
///
/// A single NIO scheduled task is armed for the earliest deadline, so thousands
/// of timers cost one kernel timer. Repeating timers are anchored to their first
/// deadline (tick *n* is due at `start + n * interval`), so late callbacks do not
/// accumulate drift; ticks missed entirely while the loop was busy are skipped,
/// not fired in a burst.
///
/// Not thread-safe: every method must be called on `eventLoop`.
///
/// ```swift
/// let timers = TimerScheduler(eventLoop: loop)
/// let id = timers.schedule(after: .milliseconds(10), every: .milliseconds(10)) { print("tick") }
/// timers.cancel(id)
/// ```
public final class TimerScheduler {
    public struct ID: Hashable, Sendable {
        fileprivate let value: UInt64
    }

    private struct Timer {
        var deadline: NIODeadline
        var interval: TimeAmount?
        var fire: () -> Void
    }

    public let eventLoop: EventLoop
    /// The clock the timers are on (the runtime's; virtual under `--virtual-time`).
    public let clock: RuntimeClock
    /// The time source; tests pass a virtual one along with an `EmbeddedEventLoop`.
    private let now: () -> NIODeadline
    private var timers: [ID: Timer] = [:]
    private var queue = TimerQueue<ID>()
    private var armed: (deadline: NIODeadline, task: ClockTask)?
    private var nextID: UInt64 = 0

    public init(eventLoop: EventLoop, now: @escaping () -> NIODeadline = NIODeadline.now) {
        self.eventLoop = eventLoop
        self.clock = .real
        self.now = now
    }

    /// Timers on `clock`.
    public init(eventLoop: EventLoop, clock: RuntimeClock) {
        self.eventLoop = eventLoop
        self.clock = clock
        self.now = { clock.now() }
    }

    /// Timers scheduled and not yet fired (one-shot) or cancelled.
    public var count: Int { timers.count }

    /// The scheduler of `eventLoop` shared by whoever asks for it (every connection's
    /// heartbeat on that loop), so thousands of connections arm one NIO task between them
    /// instead of one each. Call on `eventLoop`.
    public static func shared(on eventLoop: EventLoop) -> TimerScheduler {
        eventLoop.preconditionInEventLoop()
        let clock = RuntimeClock.of(eventLoop)
        return perThread.currentValue(
            orMake: { TimerScheduler(eventLoop: eventLoop, clock: clock) },
            keepingIf: { $0.eventLoop === eventLoop && $0.clock === clock }
        )
    }

    // One per loop thread; an embedded loop runs on its caller's thread, hence the check
    // of the loop in `shared(on:)`.
    private static let perThread = ThreadSpecificVariable<TimerScheduler>()

    /// Schedules `fire` after `delay`, then every `interval` if one is given.
    @discardableResult
    public func schedule(after delay: TimeAmount, every interval: TimeAmount? = nil, _ fire: @escaping () -> Void) -> ID {
        self.schedule(at: now() + max(delay, .zero), every: interval, fire)
    }

    /// Schedules `fire` at `deadline`, then every `interval` if one is given.
    @discardableResult
    public func schedule(at deadline: NIODeadline, every interval: TimeAmount? = nil, _ fire: @escaping () -> Void) -> ID {
        eventLoop.preconditionInEventLoop()
        let id = ID(value: nextID)
        nextID &+= 1
        timers[id] = Timer(deadline: deadline, interval: interval.map { max($0, .nanoseconds(1)) }, fire: fire)
        queue.insert(id, at: deadline)
        rearm()
        return id
    }

    /// Cancels a timer; returns false if it had already fired or been cancelled.
    ///
    /// A cancelled timer's entry stays in the queue until it comes up, unless that would
    /// let the queue grow past its live timers: the last live timer cancelled empties the
    /// queue and disarms the loop's task (a loop with a task pending reads the clock on
    /// every tick), and once the cancelled entries outnumber the live ones (plus
    /// ``staleSlack``) they are all dropped at once. A script that waits with a timeout
    /// for every message (`c:receive(30)`) behind a repeating timer kept one entry per
    /// message for 30 s; now the queue holds at most twice its live timers plus the slack.
    @discardableResult
    public func cancel(_ id: ID) -> Bool {
        eventLoop.preconditionInEventLoop()
        guard timers.removeValue(forKey: id) != nil else { return false }
        if timers.isEmpty {
            emptyQueue()
        } else if queue.count - timers.count > timers.count + Self.staleSlack {
            queue.removeAll { timers[$0] == nil }
        }
        return true
    }

    /// Cancelled entries the queue may hold beyond as many as it has live timers.
    static let staleSlack = 64

    /// Entries in the queue, live or cancelled, and whether the loop's task is armed (tests).
    var queuedCount: Int { queue.count }
    var isArmed: Bool { armed != nil }

    /// Cancels every timer.
    public func cancelAll() {
        timers.removeAll()
        emptyQueue()
    }

    /// No timer is live: drops what the queue still holds and disarms the loop's task.
    private func emptyQueue() {
        queue = TimerQueue()
        armed?.task.cancel()
        armed = nil
    }

    private func rearm() {
        // Cancelled timers stay in the queue until they come up; drop them here so
        // that the armed deadline is always a live one.
        while let id = queue.first, timers[id] == nil {
            queue.removeFirst()
        }
        guard let deadline = queue.firstDeadline else { return emptyQueue() }
        if let armed, armed.deadline <= deadline { return }
        armed?.task.cancel()
        let task = clock.scheduleTask(on: eventLoop, deadline: deadline) { [weak self] in
            guard let self else { return }
            self.fireDue()
        }
        armed = (deadline, task)
    }

    private func fireDue() {
        armed = nil
        // What the timers write goes out when they are done (one flush per connection).
        EndOfTickFlusher.shared(on: eventLoop).flushing { self.fireTimers(dueBy: self.now()) }
        rearm()
    }

    private func fireTimers(dueBy now: NIODeadline) {
        while let id = queue.popFirst(dueBy: now) {
            guard var timer = timers[id] else { continue }
            if let interval = timer.interval {
                var next = timer.deadline + interval
                if next <= now {
                    let missed = (now - timer.deadline).nanoseconds / interval.nanoseconds
                    next = timer.deadline + .nanoseconds(interval.nanoseconds * (missed + 1))
                }
                timer.deadline = next
                timers[id] = timer
                queue.insert(id, at: next)
            } else {
                timers[id] = nil
            }
            timer.fire()
        }
    }
}
