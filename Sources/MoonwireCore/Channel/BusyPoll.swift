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
/// about a microsecond of its own CPU time, which only pays when the peer runs on
/// another CPU (``defaultWindow``).
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
    private var window: TimeAmount
    /// The pipe's write end, while the loop reads the other end.
    private var wakeFD: CInt = -1
    private var flushedAt = NIODeadline.uptimeNanoseconds(0)
    private var awaiting = false
    private var polling = false
    /// Something was read since the last ask: the loop had work, so the next ask need
    /// not yield.
    private var readSinceAsk = false
    /// Passes of the loop spent polling, since the start (tests, profiles).
    private(set) var passes = 0

    /// Whether the loop is polling now.
    var isPolling: Bool { self.polling }
    /// Whether the pipe is open: from shortly after ``install(on:window:)`` until the loop
    /// closes it.
    var isOpen: Bool { self.wakeFD >= 0 }

    private init(loop: EventLoop, window: TimeAmount) {
        self.loop = loop
        self.window = window
    }

    /// Polls `loop` for `window` after each flush of its message handlers added from now
    /// on; `.zero` stops polling. Call on `loop`, an event-loop group's thread.
    public static func install(on loop: EventLoop, window: TimeAmount) {
        if let poll = perThread.currentValue, poll.loop === loop {
            poll.window = max(window, .zero)
            return
        }
        guard window > .zero else { return }
        let poll = BusyPoll(loop: loop, window: window)
        perThread.currentValue = poll
        poll.openPipe()
    }

    /// The window the command line uses unless told: 50 µs (the value Linux's
    /// documentation suggests for `net.core.busy_poll`) when the process may run on more
    /// than one CPU, else none: a peer on the same CPU runs only when this one yields, and
    /// each pass of polling then costs it CPU time it would have had.
    public static var defaultWindow: TimeAmount {
        allowedCPUs(status: try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) > 1 ? .microseconds(50) : .zero
    }

    /// How many CPUs the process may run on (`taskset`, cpusets): the mask of
    /// `Cpus_allowed` in the text of /proc/self/status; without it, the machine's count.
    static func allowedCPUs(status: String?) -> Int {
        guard let line = status?.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed:") }) else {
            return System.coreCount
        }
        return line.dropFirst("Cpus_allowed:".count).reduce(0) { count, digit in
            count + (digit.hexDigitValue ?? 0).nonzeroBitCount
        }
    }

    /// The poller of `loop` while it polls; call on `loop`.
    static func shared(on loop: EventLoop) -> BusyPoll? {
        guard let poll = perThread.currentValue, poll.loop === loop, poll.window > .zero else { return nil }
        return poll
    }

    private func openPipe() {
        var fds: [CInt] = [-1, -1]
        guard pipe(&fds) == 0 else { return }
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
                case .failure:
                    close(fds[0])
                    close(writeEnd)
                }
            }
    }

    fileprivate func pipeClosed() {
        if self.wakeFD >= 0 { close(self.wakeFD) }
        self.wakeFD = -1
        self.polling = false
    }

    /// Bytes were flushed to a peer: poll for its answer.
    func flushed() {
        guard self.wakeFD >= 0 else { return }
        self.flushedAt = .now()
        self.awaiting = true
        guard !self.polling else { return }
        self.polling = true
        self.ask()
    }

    /// Something was read: polling stops.
    func received() {
        self.awaiting = false
        self.readSinceAsk = true
    }

    /// The loop read the pipe: one pass went by.
    fileprivate func passed() {
        guard self.polling else { return }
        self.passes &+= 1
        guard self.awaiting, NIODeadline.now() - self.flushedAt < self.window else {
            self.polling = false
            return
        }
        if !self.readSinceAsk { sched_yield() }
        self.ask()
    }

    private func ask() {
        self.readSinceAsk = false
        var byte: UInt8 = 1
        if write(self.wakeFD, &byte, 1) < 0, errno != EAGAIN {
            self.polling = false
        }
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
