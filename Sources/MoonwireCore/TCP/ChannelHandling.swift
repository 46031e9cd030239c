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

/// The outbound side of a message channel handler, one implementation for
/// ``WebSocketHandler`` and ``FramedChannelHandler``: the gathered buffer (small frames
/// made into one buffer, written ahead of any other write and at every flush), flush
/// batching (``FlushBatching``) and writability, which it passes to the connection's send
/// budget (``OutboundBuffer``) while one is attached, so that the budget writes out what
/// waited. The handler calls it from its own handler methods; it is not a pipeline handler
/// of its own, so a message takes no extra hop. A class, made once per connection: its
/// writes reach the channel, which can call the handler back (writability) before they
/// return, so the handler must not hold an access to it for the length of a call.
///
/// ```swift
/// // channelRead:                 outbound.readStarted()
/// // channelReadComplete:         outbound.readComplete(context)
/// // channelWritabilityChanged:   outbound.writabilityChanged(context)
/// // a frame:                     outbound.write(frame, context: context, flusher: self)
/// // a small frame:               var buffer = outbound.takeGathered(...); append; outbound.gathered(buffer, ...)
/// // flushAtEndOfTick():          outbound.flushAtEndOfTick(context)
/// ```
final class ChannelOutbound {
    /// ``gathered(_:context:flusher:)`` hands the buffer to the channel once it holds this
    /// much, so what the channel's water marks (and `buffered`) do not see yet stays small.
    static var gatherBufferLimit: Int { 64 * 1024 }

    private var flushes = FlushBatching()
    /// Small frames made since the last write to the channel, in order.
    private var gathered: ByteBuffer?
    /// The connection's send budget, while attached to this handler's channel.
    weak var budget: OutboundBuffer?
    /// The channel's allocator, read once by ``added(_:)``: `context.channel.allocator`
    /// costs a witness call and a retain and release of the channel, on every message.
    private(set) var allocator = ByteBufferAllocator()

    /// At handlerAdded.
    func added(_ context: ChannelHandlerContext) {
        self.allocator = context.channel.allocator
    }

    /// Bytes of the small frames not handed to the channel yet (not in its buffered bytes).
    var gatheredBytes: Int { self.gathered?.readableBytes ?? 0 }

    func readStarted() {
        self.flushes.readStarted()
    }

    /// At channelReadComplete: flushes what was written during the read.
    func readComplete(_ context: ChannelHandlerContext) {
        if self.flushes.readEnded() {
            self.writeGathered(context)
            context.flush()
        }
    }

    /// Writes `buffer` after what was gathered before it; flushed at the end of the read
    /// or of the loop tick.
    func write(_ buffer: ByteBuffer, context: ChannelHandlerContext, flusher: some EndOfTickFlushing) {
        self.writeGathered(context)
        context.write(NIOAny(buffer), promise: nil)
        self.flushes.wrote(flusher, loop: context.eventLoop)
    }

    /// The gathered buffer to append one more small frame to (a new one of `capacity`
    /// bytes when there is none); give it back with ``gathered(_:context:flusher:)``.
    func takeGathered(capacity: Int) -> ByteBuffer {
        self.gathered.take() ?? self.allocator.buffer(capacity: capacity)
    }

    /// Keeps `buffer` (from ``takeGathered(capacity:)``) for more small frames, or
    /// writes it once it holds ``gatherBufferLimit`` bytes; flushed like any write.
    func gathered(_ buffer: ByteBuffer, context: ChannelHandlerContext, flusher: some EndOfTickFlushing) {
        if buffer.readableBytes >= Self.gatherBufferLimit {
            context.write(NIOAny(buffer), promise: nil)
        } else {
            self.gathered = buffer
        }
        self.flushes.wrote(flusher, loop: context.eventLoop)
    }

    /// Hands the gathered small frames to the channel.
    func writeGathered(_ context: ChannelHandlerContext) {
        if let gathered = self.gathered.take() {
            context.write(NIOAny(gathered), promise: nil)
        }
    }

    /// The end-of-tick flush (``EndOfTickFlushing/flushAtEndOfTick()``).
    func flushAtEndOfTick(_ context: ChannelHandlerContext?) {
        self.flushes.scheduledFlushRuns()
        guard let context else { return }
        self.writeGathered(context)
        context.flush()
    }

    /// The handler left the pipeline: what was gathered is not written.
    func removed() {
        self.gathered = nil
    }

    /// Passes the event on, then lets the budget write out what waited when the channel
    /// became writable again.
    func writabilityChanged(_ context: ChannelHandlerContext) {
        context.fireChannelWritabilityChanged()
        if context.channel.isWritable { self.budget?.channelBecameWritable(context.channel) }
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
/// Used on its loop only.
final class EndOfTickFlusher {
    // One per loop thread; an embedded loop runs on its caller's thread, hence the check
    // of the loop in `shared(on:)` (a flush task left on an embedded loop that never runs
    // again must not hold up another loop's handlers).
    private static let perThread = ThreadSpecificVariable<EndOfTickFlusher>()
    private let loop: EventLoop
    private var pending: [any EndOfTickFlushing] = []
    private var spare: [any EndOfTickFlushing] = []
    private var scheduled = false

    private init(loop: EventLoop) {
        self.loop = loop
    }

    /// The flusher of `loop`. Call on `loop`.
    static func shared(on loop: EventLoop) -> EndOfTickFlusher {
        perThread.currentValue(orMake: { EndOfTickFlusher(loop: loop) }, keepingIf: { $0.loop === loop })
    }

    func add(_ handler: any EndOfTickFlushing) {
        self.pending.append(handler)
        guard !self.scheduled else { return }
        self.scheduled = true
        self.loop.assumeIsolated().execute { self.run() }
    }

    private func run() {
        self.scheduled = false
        // A handler that writes again while flushing lands in the next tick's list.
        swap(&self.pending, &self.spare)
        for handler in self.spare { handler.flushAtEndOfTick() }
        self.spare.removeAll(keepingCapacity: self.spare.count <= 4096)
    }
}

extension ThreadSpecificVariable {
    /// This thread's value while `valid` accepts it; else `make` builds the one it keeps
    /// from then on (per loop thread objects: an embedded loop runs on its caller's thread,
    /// so the ones that belong to a loop check it).
    func currentValue(orMake make: () -> Value, keepingIf valid: (Value) -> Bool = { _ in true }) -> Value {
        if let value = self.currentValue, valid(value) { return value }
        let value = make()
        self.currentValue = value
        return value
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
