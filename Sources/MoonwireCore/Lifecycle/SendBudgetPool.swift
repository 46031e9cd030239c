import NIOCore

/// The send budget of every connection of one event loop together (the process-wide
/// budget, shared by the loops of `run --workers N`), on top of each connection's own.
///
/// Every ``OutboundBuffer`` made with a pool charges it what it holds: its queue, exactly,
/// and what its channel has not handed to the kernel yet, as a bound (each write adds its
/// size; the bound is brought down to what the channel holds when the buffer next asks
/// the channel, when the channel becomes writable again, or when the pool asks every
/// buffer holding channel bytes: before it would turn a message away, at most once per
/// eighth of the budget written or per 10 ms, and every 20 to 160 ms while buffers wait
/// for it to drain). An offer that would take the pool past ``budget`` is turned away as
/// when the buffer's own budget is full: the buffer's overflow rule decides, and its
/// `drain` waits until the pool is back under half. Nothing that was taken is dropped
/// for the pool.
///
/// One pool per event loop, used on that loop only: no lock or atomic on the message path.
///
/// ```swift
/// let pool = SendBudgetPool(budget: 256 << 20, eventLoop: loop)
/// pool.onFirstReached = { logger.warning("process send budget reached") }
/// var configuration = ManagedConnection.Configuration()
/// configuration.sendBudget = pool
/// ```
public final class SendBudgetPool {
    /// The most bytes the loop's buffers hold together; 0 for no limit. Changing it
    /// applies to the next offer.
    public var budget: Int {
        didSet { self.wakeIfUnderHalf() }
    }
    /// Bytes charged by the buffers: their queues plus a bound of what their channels hold.
    public private(set) var used = 0
    /// Messages the pool turned away (refused or dropped by an overflow rule).
    public private(set) var turnedAway = 0
    /// Called the first time the pool turns a message away: the one warning.
    public var onFirstReached: (() -> Void)?
    public let eventLoop: EventLoop

    private var warned = false
    /// Buffers charging channel bytes (a bound that may be stale): what ``reconcile()``
    /// asks. Each buffer knows its slot.
    private var holders: [Weak] = []
    /// Buffers the pool turned a message away for, woken once it is under half.
    private var waiters: [Weak] = []
    /// Channel bytes charged by writes since the last ``reconcile()``.
    private var unsampled = 0
    private var lastReconcile = NIODeadline.uptimeNanoseconds(0)
    private var poll: Scheduled<Void>?
    private var pollDelay = SendBudgetPool.pollInterval
    private var wakeScheduled = false

    private struct Weak {
        weak var buffer: OutboundBuffer?
    }

    /// How often the channels are asked while buffers wait: the kernel taking bytes from a
    /// channel that stays writable is no event of its own. Each ask that finds nothing
    /// taken doubles the wait, up to ``pollIntervalMax``: asking 10 000 stalled channels
    /// costs about a millisecond.
    static let pollInterval = TimeAmount.milliseconds(20)
    static let pollIntervalMax = TimeAmount.milliseconds(160)

    /// A pool of `budget` bytes (0: no limit) for the buffers of `eventLoop`.
    public init(budget: Int, eventLoop: EventLoop) {
        self.budget = budget
        self.eventLoop = eventLoop
    }

    /// Buffers waiting for the pool to drain.
    public var waiting: Int { self.waiters.count }

    /// `256 MiB`: the budget in a message.
    public var described: String { ByteSize.describe(self.budget) }

    // MARK: Charging (by OutboundBuffer)

    @inline(__always)
    func add(_ delta: Int) {
        self.used += delta
        if delta < 0 && !self.waiters.isEmpty { self.wakeIfUnderHalf() }
    }

    /// A write put `bytes` in a channel: charged until the channel is next asked.
    @inline(__always)
    func wrote(_ bytes: Int) {
        self.unsampled += bytes
    }

    /// True when `size` more bytes fit; when they do not by the charges, the channels are
    /// asked first (unless they were lately).
    @inline(__always)
    func fits(_ size: Int) -> Bool {
        self.budget == 0 || self.used + size <= self.budget || self.fitsAfterAsking(size)
    }

    private func fitsAfterAsking(_ size: Int) -> Bool {
        let now = NIODeadline.now()
        guard self.unsampled >= self.budget / 8 || now - self.lastReconcile >= .milliseconds(10) else { return false }
        self.reconcile(now: now)
        return self.used + size <= self.budget
    }

    /// The pool turned one of `buffer`'s messages away: it waits for the pool to drain,
    /// and the first time, the warning.
    func turnedAway(_ buffer: OutboundBuffer) {
        self.turnedAway += 1
        if !buffer.poolWaiting {
            buffer.poolWaiting = true
            self.waiters.append(Weak(buffer: buffer))
            self.startPolling()
        }
        if !self.warned {
            self.warned = true
            self.onFirstReached?()
        }
    }

    func hold(_ buffer: OutboundBuffer) {
        buffer.poolSlot = self.holders.count
        self.holders.append(Weak(buffer: buffer))
    }

    func release(slot: Int) {
        let last = self.holders.removeLast()
        guard slot < self.holders.count else { return }
        self.holders[slot] = last
        last.buffer?.poolSlot = slot
    }

    // MARK: Draining

    /// Asks every buffer holding channel bytes what its channel holds now.
    func reconcile(now: NIODeadline = .now()) {
        self.lastReconcile = now
        self.unsampled = 0
        var index = self.holders.count - 1
        while index >= 0 {
            // Backwards: a buffer whose channel is empty leaves its slot to the last one,
            // already asked.
            if index < self.holders.count {
                if let buffer = self.holders[index].buffer {
                    buffer.sampleChannelForPool()
                } else {
                    self.release(slot: index)
                }
            }
            index -= 1
        }
    }

    private func startPolling() {
        guard self.poll == nil else { return }
        self.poll = self.eventLoop.scheduleTask(in: self.pollDelay) { [weak self] in
            guard let self else { return }
            self.poll = nil
            let before = self.used
            self.reconcile()
            self.pollDelay = self.used < before ? Self.pollInterval : min(self.pollDelay * 2, Self.pollIntervalMax)
            self.wakeIfUnderHalf()
            self.waiters.removeAll { $0.buffer == nil }
            if !self.waiters.isEmpty { self.startPolling() }
        }
    }

    /// Under half (or no limit any more): the waiting buffers are woken on the next turn of
    /// the loop, never from inside an offer or a flush (their drain runs the script).
    private func wakeIfUnderHalf() {
        guard !self.waiters.isEmpty, !self.wakeScheduled, self.budget == 0 || self.used < self.budget / 2 else { return }
        self.wakeScheduled = true
        self.eventLoop.execute { [weak self] in
            guard let self else { return }
            self.wakeScheduled = false
            guard self.budget == 0 || self.used < self.budget / 2 else { return }
            let woken = self.waiters
            self.waiters.removeAll()
            self.poll?.cancel()
            self.poll = nil
            self.pollDelay = Self.pollInterval
            for waiter in woken { waiter.buffer?.poolDrained() }
        }
    }

    /// The default process-wide send budget: a quarter of the machine's memory, at most
    /// 1 GiB (1 GiB when the memory is unknown). `run --workers N` gives each loop its part.
    public static var defaultBudget: Int {
        let physical = ByteSize.physicalMemory
        return physical > 0 ? max(16 << 20, min(1 << 30, physical / 4)) : 1 << 30
    }
}
