import NIOCore

/// When the channel handlers flush. Writes made while a read is being delivered
/// (an echo, a reply from on_message) go out with one flush at channelReadComplete;
/// writes made from elsewhere (a timer, a script's loop) with one flush at the end
/// of the loop tick. Either way a burst of sends costs one system call.
///
/// ```swift
/// // channelRead:          flushes.readStarted()
/// // channelReadComplete:  if flushes.readEnded() { context.flush() }
/// // after a write:        if flushes.wrote() { loop.execute { flushes.scheduledFlushRuns(); flush() } }
/// ```
struct FlushBatching {
    private var reading = false
    private var pendingAfterRead = false
    private var scheduled = false

    mutating func readStarted() {
        self.reading = true
    }

    /// At channelReadComplete: true when writes made during the read wait for a flush.
    mutating func readEnded() -> Bool {
        self.reading = false
        defer { self.pendingAfterRead = false }
        return self.pendingAfterRead
    }

    /// After a write: true when the caller must schedule the end-of-tick flush.
    mutating func wrote() -> Bool {
        if self.reading {
            self.pendingAfterRead = true
            return false
        }
        if self.scheduled { return false }
        self.scheduled = true
        return true
    }

    /// The scheduled flush is running: later writes need a new one.
    mutating func scheduledFlushRuns() {
        self.scheduled = false
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
