import NIOCore
import NIOPosix

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

    /// The loop's busy poller, when polling is on.
    private var poll: BusyPoll?
    /// The loop's spare gathered buffer (``SpareGatherBuffer``).
    private var spare: SpareGatherBuffer?

    /// At handlerAdded.
    func added(_ context: ChannelHandlerContext) {
        self.allocator = context.channel.allocator
        self.poll = BusyPoll.shared(on: context.eventLoop)
        self.spare = SpareGatherBuffer.shared(on: context.eventLoop)
    }

    /// Bytes of the small frames not handed to the channel yet (not in its buffered bytes).
    var gatheredBytes: Int { self.gathered?.readableBytes ?? 0 }

    func readStarted() {
        self.flushes.readStarted()
        self.poll?.received()
    }

    /// At channelReadComplete: flushes what was written during the read.
    func readComplete(_ context: ChannelHandlerContext) {
        if self.flushes.readEnded() {
            self.writeGathered(context)
            context.flush()
            self.poll?.flushed()
        }
    }

    /// Writes `buffer` after what was gathered before it; flushed at the end of the read
    /// or of the loop tick.
    func write(_ buffer: ByteBuffer, context: ChannelHandlerContext, flusher: some EndOfTickFlushing) {
        self.writeGathered(context)
        context.write(NIOAny(buffer), promise: nil)
        self.flushes.wrote(flusher, loop: context.eventLoop)
    }

    /// The gathered buffer to append one more small frame to (when there is none, the
    /// loop's spare, emptied, or a new one of `capacity` bytes); give it back with
    /// ``gathered(_:context:flusher:)``.
    func takeGathered(capacity: Int) -> ByteBuffer {
        if let gathered = self.gathered.take() { return gathered }
        guard var reused = self.spare?.buffer.take() else { return self.allocator.buffer(capacity: capacity) }
        reused.clear(minimumCapacity: capacity)
        return reused
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

    /// Hands the gathered small frames to the channel, and keeps their buffer as the loop's
    /// spare.
    func writeGathered(_ context: ChannelHandlerContext) {
        if let gathered = self.gathered.take() {
            context.write(NIOAny(gathered), promise: nil)
            self.spare?.buffer = gathered
        }
    }

    /// The end-of-tick flush (``EndOfTickFlushing/flushAtEndOfTick()``).
    func flushAtEndOfTick(_ context: ChannelHandlerContext?) {
        self.flushes.scheduledFlushRuns()
        guard let context else { return }
        self.writeGathered(context)
        context.flush()
        self.poll?.flushed()
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

/// The gathered buffer a handler on this loop thread handed to its channel last, kept for
/// the next handler that gathers: a connection that answers each read with one small
/// message (an echo, a request and its reply) allocated and freed a buffer per message.
/// Once the channel has written it nothing else holds it, and `clear` empties it in place;
/// while the channel still holds it, `clear` makes a new one, as the allocator would, and
/// the bytes waiting in it stay as they are. One per loop thread, so at most one buffer
/// (up to twice ``ChannelOutbound/gatherBufferLimit``) per loop. Used on its loop only.
final class SpareGatherBuffer: LoopLocal {
    static let perThread = ThreadSpecificVariable<SpareGatherBuffer>()
    let loop: EventLoop
    var buffer: ByteBuffer?

    init(loop: EventLoop) {
        self.loop = loop
    }
}
