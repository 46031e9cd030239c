import NIOCore
import NIOPosix

/// When the channel handlers flush. Writes made while a read is being delivered
/// (an echo, a reply from on_message) go out with one flush at channelReadComplete;
/// writes made from elsewhere (a timer, a script's loop) with one flush at the end
/// of the loop tick. Either way a burst of sends costs one system call.
///
/// ```swift
/// // channelRead:          flushes.readStarted()
/// // channelReadComplete:  if flushes.readEnded() { context.flush() }
/// // after a write:        flushes.wrote(self, loop: context.eventLoop)
/// // flushAtEndOfTick():   flushes.scheduledFlushRuns(); flush()
/// ```
struct FlushBatching {
    private var reading = false
    private var pendingAfterRead = false
    private var scheduled = false
    /// The loop thread's flusher, looked up on the first write.
    private var flusher: EndOfTickFlusher?

    mutating func readStarted() {
        self.reading = true
    }

    /// At channelReadComplete: true when writes made during the read wait for a flush.
    mutating func readEnded() -> Bool {
        self.reading = false
        defer { self.pendingAfterRead = false }
        return self.pendingAfterRead
    }

    /// After a write: has `handler` flushed at the end of this loop tick, unless a flush
    /// is due already (the read's, or one asked for before).
    mutating func wrote(_ handler: some EndOfTickFlushing, loop: EventLoop) {
        if self.reading {
            self.pendingAfterRead = true
            return
        }
        if self.scheduled { return }
        self.scheduled = true
        if self.flusher == nil { self.flusher = EndOfTickFlusher.current }
        self.flusher?.add(handler, loop: loop)
    }

    /// The end-of-tick flush is running: later writes need a new one.
    mutating func scheduledFlushRuns() {
        self.scheduled = false
    }
}

/// A channel handler that ``FlushBatching`` flushes at the end of a loop tick.
protocol EndOfTickFlushing: AnyObject {
    /// Calls `scheduledFlushRuns()` on its ``FlushBatching`` and flushes.
    func flushAtEndOfTick()
}

/// The end-of-tick flushes of one event-loop thread: one task per tick flushes every
/// handler that wrote outside a read, in the order they wrote, instead of a task per
/// handler (a script sending once on each of 10 000 connections would queue 10 000).
/// Used on its own thread only.
final class EndOfTickFlusher {
    private static let perThread = ThreadSpecificVariable<EndOfTickFlusher>()
    private var pending: [any EndOfTickFlushing] = []
    private var spare: [any EndOfTickFlushing] = []
    private var scheduled = false

    static var current: EndOfTickFlusher {
        if let flusher = perThread.currentValue { return flusher }
        let flusher = EndOfTickFlusher()
        perThread.currentValue = flusher
        return flusher
    }

    func add(_ handler: any EndOfTickFlushing, loop: EventLoop) {
        self.pending.append(handler)
        guard !self.scheduled else { return }
        self.scheduled = true
        loop.assumeIsolated().execute { self.run() }
    }

    private func run() {
        self.scheduled = false
        // A handler that writes again while flushing lands in the next tick's list.
        swap(&self.pending, &self.spare)
        for handler in self.spare { handler.flushAtEndOfTick() }
        self.spare.removeAll(keepingCapacity: self.spare.count <= 4096)
    }
}

extension ChannelHandlerContext {
    /// Closes the channel; with `reset`, the kernel sends RST instead of FIN
    /// (SO_LINGER 0), as a crashed peer or a middlebox would.
    func close(reset: Bool) {
        guard reset, let socket = self.channel as? SocketOptionProvider else {
            self.close(promise: nil)
            return
        }
        socket.setSoLinger(NIOLinger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
            self.close(promise: nil)
        }
    }
}
