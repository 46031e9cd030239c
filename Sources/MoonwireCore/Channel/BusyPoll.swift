import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Busy polling after a write (`run --busy-poll`): once a loop has flushed bytes to a peer
/// and read nothing since, it asks the kernel for events without sleeping for up to its
/// window, giving the CPU to any other runnable thread between asks (`sched_yield`). A
/// reply that comes within the window is read without waking a sleeping thread, which on
/// a virtual machine costs tens of microseconds when the reply comes from another CPU.
///
/// Each ask is one pass of the loop: a byte written to a pipe the loop watches makes its
/// next wait for events return at once, with whatever else is ready; reading the byte
/// asks again while the window lasts. Polling stops at the first read from any channel
/// or when the window is over; the next flush starts it again. Each pass costs the loop
/// about a microsecond of its own CPU time, which pays only when the answer comes from
/// another CPU a little later; ``PollPolicy`` backs off when it does not.
///
/// One per loop thread, used on its loop only; ``install(on:window:)`` makes it (on the
/// loop), the message handlers find it when added, and closing the loop closes its pipe.
///
/// ```swift
/// loop.execute { BusyPoll.install(on: loop, window: .microseconds(50)) }
/// ```
public final class BusyPoll {
    private static let perThread = ThreadSpecificVariable<BusyPoll>()

    private let loop: EventLoop
    /// The pipe's write end, while the loop reads the other end.
    private var wakeFD: CInt = -1
    private var policy: PollPolicy
    /// Passes of the loop spent polling, since the start (tests, profiles).
    private(set) var passes = 0

    /// Whether the loop is polling now.
    var isPolling: Bool { self.policy.polling }
    /// Whether the pipe is open: from shortly after ``install(on:window:)`` until the loop
    /// closes it.
    var isOpen: Bool { self.wakeFD >= 0 }

    private init(loop: EventLoop, window: TimeAmount) {
        self.loop = loop
        self.policy = PollPolicy(window: window)
    }

    /// Polls `loop` for `window` after each flush of its message handlers added from now
    /// on; `.zero` stops polling. Call on `loop`, an event-loop group's thread.
    /// Polling needs a pipe: when the process cannot have one (out of descriptors), the loop
    /// sleeps as if the window were zero and `unavailable` hears why, in words.
    public static func install(on loop: EventLoop, window: TimeAmount, unavailable: @escaping (String) -> Void = { _ in }) {
        if let poll = perThread.currentValue, poll.loop === loop {
            poll.policy.window = max(window, .zero)
            return
        }
        guard window > .zero else { return }
        let poll = BusyPoll(loop: loop, window: window)
        perThread.currentValue = poll
        poll.openPipe(unavailable: unavailable)
    }

    /// The window the command line uses unless told: 50 µs, the value Linux's
    /// documentation suggests for `net.core.busy_poll`.
    public static let defaultWindow = TimeAmount.microseconds(50)

    /// The poller of `loop` while it polls; call on `loop`.
    static func shared(on loop: EventLoop) -> BusyPoll? {
        guard let poll = perThread.currentValue, poll.loop === loop, poll.policy.window > .zero else { return nil }
        return poll
    }

    private func openPipe(unavailable: @escaping (String) -> Void) {
        var fds: [CInt] = [-1, -1]
        guard pipe(&fds) == 0 else {
            unavailable("busy polling is off: no pipe for it (\(String(cString: strerror(errno))))")
            return
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        let writeEnd = fds[1]
        NIOPipeBootstrap(group: self.loop)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 64))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(PollPipeHandler(poll: self))
                }
            }
            .takingOwnershipOfDescriptor(input: fds[0])
            .assumeIsolated()
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    self.wakeFD = writeEnd
                    channel.closeFuture.assumeIsolated().whenComplete { _ in self.pipeClosed() }
                case .failure(let error):
                    close(fds[0])
                    close(writeEnd)
                    unavailable("busy polling is off: its pipe could not join the loop (\(error))")
                }
            }
    }

    fileprivate func pipeClosed() {
        if self.wakeFD >= 0 { close(self.wakeFD) }
        self.wakeFD = -1
        self.policy.closed()
    }

    /// Bytes were flushed to a peer: poll for its answer (``PollPolicy``).
    func flushed() {
        guard self.wakeFD >= 0, self.policy.flushed(at: .now()) else { return }
        self.ask()
    }

    /// Something was read.
    func received() {
        self.policy.received()
    }

    /// The loop read the pipe: one pass went by.
    fileprivate func passed() {
        guard self.policy.polling else { return }
        self.passes &+= 1
        switch self.policy.passed(at: .now()) {
        case .stop:
            return
        case .ask:
            self.ask()
        case .yieldThenAsk:
            let before = NIODeadline.now()
            sched_yield()
            self.policy.yielded(for: .now() - before)
            self.ask()
        }
    }

    private func ask() {
        self.policy.asked()
        var byte: UInt8 = 1
        if write(self.wakeFD, &byte, 1) < 0, errno != EAGAIN {
            self.policy.closed()
        }
    }
}

/// When ``BusyPoll`` asks: after a flush, for up to `window`, until something is read,
/// and only while polling pays. It pays when the loop would have slept for what it
/// read (a pass found nothing first) and no other thread wanted this CPU meanwhile (no
/// yield took long). When it does not pay (the answer was there at the first look: it
/// came from this loop, or from a peer that ran on this CPU as soon as the send woke
/// it; another thread ran while the loop yielded; no answer came within the window)
/// the next 1, 3, 7 ... 255 flushes in a row that do not pay either are let go by
/// without polling, so such a loop polls for about one flush in 256.
struct PollPolicy {
    var window: TimeAmount
    /// A `sched_yield` that takes longer than this ran another thread.
    static let yieldedAway = TimeAmount.microseconds(5)

    private(set) var polling = false
    /// Flushes still to let go by without polling.
    private(set) var skip = 0
    private var backoff = 0
    /// A flush since the last read.
    private var awaiting = false
    private var flushedAt = NIODeadline.uptimeNanoseconds(0)
    private var readSinceAsk = false
    /// Passes since the last read that found nothing to read.
    private var idlePasses = 0
    /// A yield since the last read ran another thread on this CPU.
    private var gaveCPUAway = false

    init(window: TimeAmount) {
        self.window = window
    }

    enum Step: Equatable {
        case stop, ask, yieldThenAsk
    }

    /// Bytes were flushed: true when the loop is to ask now (polling starts). The clock
    /// is read only when the flush is polled for, not for one let go by.
    mutating func flushed(at now: @autoclosure () -> NIODeadline) -> Bool {
        self.awaiting = true
        if self.polling {
            self.flushedAt = now()
            return false
        }
        if self.skip > 0 || self.window <= .zero {
            self.skip = max(self.skip - 1, 0)
            return false
        }
        self.flushedAt = now()
        self.polling = true
        self.idlePasses = 0
        self.gaveCPUAway = false
        return true
    }

    mutating func received() {
        self.awaiting = false
        self.readSinceAsk = true
    }

    /// A pass of the loop went by (call while polling): what to do next.
    mutating func passed(at now: NIODeadline) -> Step {
        if self.readSinceAsk {
            let paid = self.idlePasses > 0 && !self.gaveCPUAway
            self.idlePasses = 0
            self.gaveCPUAway = false
            guard paid else { return self.stop() }
            self.backoff = 0
        } else {
            self.idlePasses += 1
        }
        guard self.awaiting else {
            self.polling = false
            return .stop
        }
        guard now - self.flushedAt < self.window else { return self.stop() }
        // A loop that just read had work: it need not give the CPU away.
        return self.readSinceAsk ? .ask : .yieldThenAsk
    }

    mutating func yielded(for duration: TimeAmount) {
        if duration > Self.yieldedAway { self.gaveCPUAway = true }
    }

    mutating func asked() {
        self.readSinceAsk = false
    }

    /// The loop can no longer ask.
    mutating func closed() {
        self.polling = false
    }

    private mutating func stop() -> Step {
        self.polling = false
        self.backoff = min(self.backoff * 2 + 1, 255)
        self.skip = self.backoff
        return .stop
    }
}

/// The handler of ``BusyPoll``'s pipe: each read is one pass of the loop.
private final class PollPipeHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let poll: BusyPoll

    init(poll: BusyPoll) {
        self.poll = poll
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func channelReadComplete(context: ChannelHandlerContext) {
        self.poll.passed()
    }
}
