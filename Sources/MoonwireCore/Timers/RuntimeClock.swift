import NIOCore
import NIOPosix

/// The one clock a runtime reads: timers, sleeps, heartbeats, reconnect backoff,
/// connect/close/handshake timeouts and `mw.now()`.
///
/// Real by default: ``now()`` is `NIODeadline.now()` and ``scheduleTask(on:in:_:)`` is
/// the loop's own `scheduleTask` (one flag test in front of each). Made virtual
/// (``makeVirtual()``, `moonwire test --virtual-time`), time stands still while
/// anything can happen and jumps to the next deadline when nothing can: the rule is
/// ``QuiescenceGate``'s. Sockets stay real; ``ClockProbe`` (one per channel) tells the
/// clock about their I/O.
///
/// Everything is on `eventLoop`'s thread. The clock a connection or handler uses is
/// the one installed on its loop (``install()``, ``of(_:)``); a loop without one uses
/// ``real``.
///
/// ```swift
/// let clock = RuntimeClock(eventLoop: loop)
/// clock.makeVirtual()
/// clock.install()
/// let task = clock.scheduleTask(on: loop, in: .seconds(30)) { print(clock.seconds) }  // 30.0, at once
/// ```
public final class RuntimeClock: @unchecked Sendable {
    /// The real clock, for loops no runtime installed a clock on.
    public static let real = RuntimeClock(eventLoop: nil)

    /// How long outstanding I/O that makes no progress (a peer in another process that
    /// does not answer, a write to a peer that stopped reading) holds virtual time still.
    public static let stallLimit = TimeAmount.seconds(1)
    /// Real time between two quiescence checks; while I/O is outstanding, a slower poll.
    static let checkInterval = TimeAmount.microseconds(50)
    static let pendingCheckInterval = TimeAmount.milliseconds(1)

    public let eventLoop: EventLoop?
    private var virtual: VirtualState?

    public init(eventLoop: EventLoop?) {
        self.eventLoop = eventLoop
    }

    public var isVirtual: Bool { virtual != nil }

    /// Now: real, or the virtual instant.
    @inline(__always)
    public func now() -> NIODeadline {
        if let virtual { return virtual.now }
        return .now()
    }

    /// Seconds as `mw.now()` gives them: real uptime, or virtual seconds since the clock
    /// became virtual (exact: 30 s later it reads 30.0).
    public var seconds: Double {
        if let virtual { return Double((virtual.now - virtual.origin).nanoseconds) / 1e9 }
        return Double(NIODeadline.now().uptimeNanoseconds) / 1e9
    }

    /// From now on time is virtual; it starts at the real now. Call on the loop before
    /// anything is scheduled on this clock.
    public func makeVirtual() {
        precondition(eventLoop != nil, "the shared real clock cannot become virtual")
        guard virtual == nil else { return }
        virtual = VirtualState(origin: .now())
    }

    // MARK: Per loop

    private static let installed = ThreadSpecificVariable<RuntimeClock>()

    /// Makes this the clock of everything created on its loop from now on (connections,
    /// servers, their handlers). Call on the loop.
    public func install() {
        guard let eventLoop else { return }
        eventLoop.preconditionInEventLoop()
        Self.installed.currentValue = self
    }

    /// Removes this clock from its loop, if it is the one installed there.
    public func uninstall() {
        if Self.installed.currentValue === self { Self.installed.currentValue = nil }
    }

    /// The clock installed on `eventLoop` (call on that loop), or ``real``.
    public static func of(_ eventLoop: EventLoop) -> RuntimeClock {
        if let clock = installed.currentValue, clock.eventLoop === eventLoop { return clock }
        return real
    }

    /// The loop ended a tick: counted by a virtual clock installed on this thread. Called
    /// by ``LoopTicks``.
    static func loopTicked() {
        guard let clock = installed.currentValue, let virtual = clock.virtual else { return }
        virtual.ticks &+= 1
    }

    // MARK: Scheduling

    /// `fn` at `deadline` on this clock: real, the loop's own scheduled task; virtual,
    /// when the clock reaches it. Call on `eventLoop`.
    public func scheduleTask(on eventLoop: EventLoop, deadline: NIODeadline, _ fn: @escaping () -> Void) -> ClockTask {
        guard let virtual else {
            return ClockTask(.real(eventLoop.assumeIsolated().scheduleTask(deadline: deadline, fn)))
        }
        let id = virtual.add(fn, at: deadline)
        kick()
        return ClockTask(.virtual(self, id))
    }

    /// `fn` after `delay` on this clock.
    /// Real: the loop's own relative task, so a loop with a clock of its own (NIO's
    /// `EmbeddedEventLoop` in tests) keeps it.
    public func scheduleTask(on eventLoop: EventLoop, in delay: TimeAmount, _ fn: @escaping () -> Void) -> ClockTask {
        guard virtual != nil else {
            return ClockTask(.real(eventLoop.assumeIsolated().scheduleTask(in: max(delay, .zero), fn)))
        }
        return scheduleTask(on: eventLoop, deadline: now() + max(delay, .zero), fn)
    }

    fileprivate func cancel(_ id: UInt64) {
        virtual?.tasks[id] = nil
    }

    // MARK: I/O accounting (virtual only; nothing when real)

    /// Something happened (bytes read or written, a channel opened or closed): time holds.
    @inline(__always)
    public func noteActivity() {
        virtual?.activity &+= 1
    }

    /// An operation whose end the clock must wait for began (a dial: resolve, connect,
    /// proxy; a write not yet taken by the kernel).
    public func beginIO() {
        guard let virtual else { return }
        virtual.pendingIO += 1
        virtual.activity &+= 1
    }

    public func endIO() {
        guard let virtual else { return }
        virtual.pendingIO = max(0, virtual.pendingIO - 1)
        virtual.activity &+= 1
        kick()
    }

    /// Virtual: operations begun and not ended.
    public var pendingIO: Int { virtual?.pendingIO ?? 0 }

    // MARK: The driver

    private func kick() {
        guard let virtual, let eventLoop, !virtual.checkScheduled, virtual.hasLiveTask else { return }
        virtual.checkScheduled = true
        let loop = eventLoop.assumeIsolated()
        if virtual.hasDueTask {
            loop.execute { [weak self] in self?.check() }
        } else {
            let interval = virtual.pendingIO > 0 ? Self.pendingCheckInterval : Self.checkInterval
            loop.scheduleTask(in: interval) { [weak self] in self?.check() }
        }
    }

    /// Fires what is due; else jumps to the next deadline if the gate says nothing else
    /// can happen.
    private func check() {
        guard let virtual else { return }
        virtual.checkScheduled = false
        virtual.checks &+= 1
        if virtual.hasDueTask {
            virtual.fireDue()
        } else if let next = virtual.nextDeadline {
            // Loop ticks when a `LoopTicks` delegate counts them for this clock; else checks.
            let ticks = virtual.ticks > 0 && Self.installed.currentValue === self ? virtual.ticks : virtual.checks
            if virtual.gate.allowsJump(activity: virtual.activity, ticks: ticks, pendingIO: virtual.pendingIO, realNow: .now()) {
                virtual.now = max(virtual.now, next)
                virtual.jumps &+= 1
                virtual.fireDue()
            }
        }
        kick()
    }

    /// Virtual: how many times time jumped (tests).
    public var jumps: Int { virtual?.jumps ?? 0 }
}

/// A task on a ``RuntimeClock``; cancel it like NIO's `Scheduled`.
public struct ClockTask {
    fileprivate enum Kind {
        case real(Scheduled<Void>)
        case virtual(RuntimeClock, UInt64)
    }

    private let kind: Kind

    fileprivate init(_ kind: Kind) {
        self.kind = kind
    }

    public func cancel() {
        switch kind {
        case .real(let scheduled): scheduled.cancel()
        case .virtual(let clock, let id): clock.cancel(id)
        }
    }
}

/// The state of a virtual clock: its instant, its tasks in (deadline, order) order, and
/// what the quiescence check reads.
private final class VirtualState {
    let origin: NIODeadline
    var now: NIODeadline
    var tasks: [UInt64: () -> Void] = [:]
    var queue = TimerQueue<UInt64>()
    var nextID: UInt64 = 0
    var activity: UInt64 = 0
    var pendingIO = 0
    var ticks: UInt64 = 0
    var checks: UInt64 = 0
    var jumps = 0
    var checkScheduled = false
    var gate = QuiescenceGate(stallLimit: RuntimeClock.stallLimit)

    init(origin: NIODeadline) {
        self.origin = origin
        self.now = origin
    }

    func add(_ fn: @escaping () -> Void, at deadline: NIODeadline) -> UInt64 {
        let id = nextID
        nextID &+= 1
        tasks[id] = fn
        queue.insert(id, at: deadline)
        return id
    }

    /// Drops cancelled tasks from the head of the queue.
    private func skipCancelled() {
        while let id = queue.first, tasks[id] == nil { queue.removeFirst() }
    }

    var hasLiveTask: Bool {
        skipCancelled()
        return !queue.isEmpty
    }

    var nextDeadline: NIODeadline? {
        skipCancelled()
        return queue.firstDeadline
    }

    var hasDueTask: Bool {
        guard let next = nextDeadline else { return false }
        return next <= now
    }

    /// Runs the tasks due now, in (deadline, order) order; tasks they schedule for now
    /// run on the next check, after the loop had a turn at I/O.
    func fireDue() {
        var due: [UInt64] = []
        while let id = queue.popFirst(dueBy: now) { due.append(id) }
        for id in due {
            guard let fn = tasks.removeValue(forKey: id) else { continue }
            fn()
        }
        activity &+= 1
    }
}

/// When a virtual clock may jump: the rule, apart from the loop so that it can be
/// tested alone.
///
/// The clock checks, between loop ticks, three numbers: an activity count (bumped by
/// every read, write, connect, open and close on the runtime's channels, by every task
/// fired, and by every dial begun or ended), the loop's tick count, and the I/O
/// operations outstanding (dials, writes the kernel has not taken). It may jump when
/// - the activity count has not moved for two whole ticks (each tick starts with a
///   select, which hands the loop every byte a loopback peer wrote before it: so no
///   bytes are in flight between the runtime's own sockets), and
/// - nothing is outstanding, or what is outstanding has shown no progress for
///   `stallLimit` of real time (a peer in another process that never answers).
public struct QuiescenceGate {
    public let stallLimit: TimeAmount
    private var lastActivity: UInt64?
    private var lastTicks: UInt64 = 0
    private var lastChange = NIODeadline.uptimeNanoseconds(0)

    public init(stallLimit: TimeAmount) {
        self.stallLimit = stallLimit
    }

    /// Quiet ticks needed before a jump.
    public static let quietTicks: UInt64 = 2

    public mutating func allowsJump(activity: UInt64, ticks: UInt64, pendingIO: Int, realNow: NIODeadline) -> Bool {
        guard activity == lastActivity else {
            lastActivity = activity
            lastTicks = ticks
            lastChange = realNow
            return false
        }
        guard ticks &- lastTicks >= Self.quietTicks else { return false }
        return pendingIO == 0 || realNow - lastChange >= stallLimit
    }
}

/// Counts the ticks of every loop of a group for the virtual clock installed on it:
/// pass it as the group's metrics delegate (`moonwire test`, `run --virtual-time`).
/// Without it a virtual clock counts its own checks, spaced by a little real time,
/// as ticks.
public struct LoopTicks: NIOEventLoopMetricsDelegate {
    public init() {}

    public func processedTick(info: NIOEventLoopTickInfo) {
        RuntimeClock.loopTicked()
    }
}
