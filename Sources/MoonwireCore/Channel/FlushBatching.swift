import NIOCore

/// When the channel handlers flush. Writes made while a read is being delivered
/// (an echo, a reply from on_message) go out with one flush at channelReadComplete;
/// writes made from elsewhere (a timer, a script's loop) with one flush at the end
/// of the loop tick. Either way a burst of sends costs one system call.
///
/// ```swift
/// // channelRead:          flushes.readStarted()
/// // channelReadComplete:  if flushes.readEnded() { context.flush() }
/// // after a write:        flushes.wrote(self, loop: context.eventLoop)  (read only when needed)
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
    /// (`loop` is an autoclosure: `context.eventLoop` costs a retain and a release of the
    /// loop, and is needed once per connection.)
    mutating func wrote(_ handler: some EndOfTickFlushing, loop: @autoclosure () -> EventLoop) {
        if self.reading {
            self.pendingAfterRead = true
            return
        }
        if self.scheduled { return }
        self.scheduled = true
        if self.flusher == nil { self.flusher = EndOfTickFlusher.shared(on: loop()) }
        self.flusher?.add(handler)
    }

    /// The end-of-tick flush is running: later writes need a new one.
    mutating func scheduledFlushRuns() {
        self.scheduled = false
    }
}
