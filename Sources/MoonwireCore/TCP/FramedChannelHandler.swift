#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// An open TCP (or TLS) message stream: cuts inbound bytes into messages with the
/// framing's decoder, frames outbound messages with its encoder, and works out how the
/// connection ended. Used by client connections and by server peers alike.
///
/// How it ended, as a WebSocket close code (there is no close frame in TCP):
/// - `close(code:reason:)`: what was asked, clean, by `local`, after pending writes drained;
/// - EOF from the peer: 1000, clean, by `peer`;
/// - a reset, a read error or `abort()`: 1006, unclean, by `network`;
/// - a framing error: its close code (1009 or 1002), unclean, by `local`.
final class FramedChannelHandler: ChannelInboundHandler, RemovableChannelHandler, EndOfTickFlushing {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Ending {
        case requested(code: UInt16, reason: String)
        case aborted(reason: String)
        case broken
        case framing(TCPFramingError)
    }

    private var reader: MessageReader
    let encoder: MessageEncoder
    private let closeTimeout: TimeAmount
    /// Held until the close is reported, ``detach()`` or the handler leaves the pipeline,
    /// as ``WebSocketHandler`` holds its owner: an open connection is kept alive by its
    /// channel, and a received message reaches its owner without a weak load.
    private var owner: (any ChannelOwner)?
    private var context: ChannelHandlerContext?
    private var ending: Ending?
    private var reported = false
    /// Flush batching and writability (``ChannelOutbound``, shared with ``WebSocketHandler``).
    /// The gathered writes, flush batching and writability; holds the connection's send
    /// budget, told when the channel becomes writable again.
    let outbound = ChannelOutbound()
    private var closeTimer: ClockTask?

    init(framing: TCPFraming, closeTimeout: TimeAmount, owner: any ChannelOwner) {
        self.reader = MessageReader(framing.makeDecoder())
        self.encoder = MessageEncoder(framing)
        self.closeTimeout = closeTimeout
        self.owner = owner
    }

    /// Stops reporting to the owner: a dial it abandoned must not reach a newer one.
    func detach() {
        self.owner = nil
    }

    /// True until `close`, `abort` or a failure; sends are refused afterwards.
    var isOpen: Bool { self.ending == nil && self.context != nil }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.outbound.added(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.closeTimer?.cancel()
        self.owner = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        self.owner?.handlerBecameActive()
        context.fireChannelActive()
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .framing = self.ending { return }
        if case .aborted = self.ending { return }
        self.outbound.readStarted()
        self.reader.append(self.unwrapInboundIn(data))
        do {
            while let message = try self.reader.next() {
                self.owner?.handlerReceived(message, kind: .binary)
                if case .framing = self.ending { break }
                if case .aborted = self.ending { break }
            }
        } catch {
            self.ending = .framing(error)
            self.owner?.handlerFailed(error.connectionError)
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.outbound.readComplete(context)
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.outbound.writabilityChanged(context)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A reset or TLS failure ends the transport; channelInactive reports it.
        if self.ending == nil { self.ending = .broken }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.closeTimer?.cancel()
        self.report()
        context.fireChannelInactive()
    }

    private func report() {
        guard !self.reported else { return }
        self.reported = true
        let info: CloseInfo
        switch self.ending {
        case nil:
            info = CloseInfo(code: CloseCode.normal, reason: "", clean: true, initiator: .peer)
        case .requested(let code, let reason)?:
            info = CloseInfo(code: code, reason: reason, clean: true, initiator: .local)
        case .aborted(let reason)?:
            info = CloseInfo(code: CloseCode.abnormal, reason: reason, clean: false, initiator: .network)
        case .broken?:
            info = CloseInfo(code: CloseCode.abnormal, reason: "", clean: false, initiator: .network)
        case .framing(let error)?:
            info = CloseInfo(code: error.closeCode, reason: error.message, clean: false, initiator: .local)
        }
        let owner = self.owner
        self.owner = nil
        owner?.handlerClosed(info)
    }

    // MARK: Outbound

    /// Frames and writes one message.
    func send(_ message: ByteBuffer) throws(UsageError) {
        guard self.context != nil, self.ending == nil else { throw .notOpen }
        self.write(try self.encoder.encode(message, allocator: self.outbound.allocator))
    }

    /// Writes bytes already framed (a broadcast's shared buffer, or raw bytes).
    func writeEncoded(_ bytes: ByteBuffer) throws(UsageError) {
        guard self.context != nil, self.ending == nil else { throw .notOpen }
        self.write(bytes)
    }

    /// Ends the connection once everything written so far went out (or `closeTimeout`
    /// passed). Does nothing when already ending.
    func close(code: UInt16, reason: String) {
        guard let context = self.context, self.ending == nil else { return }
        self.ending = .requested(code: code, reason: reason)
        // Writes complete in order, so this empty write completes once the rest drained.
        let drained = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(self.wrapOutboundOut(ByteBuffer()), promise: drained)
        drained.futureResult.assumeIsolated().whenComplete { _ in self.context?.close(promise: nil) }
        self.closeTimer = RuntimeClock.of(context.eventLoop).scheduleTask(on: context.eventLoop, in: self.closeTimeout) {
            self.context?.close(promise: nil)
        }
    }

    /// Drops the connection now. With `reset`, the kernel sends RST instead of FIN
    /// (SO_LINGER 0), as a crashed peer or a middlebox would.
    func abort(reset: Bool, reason: String = "") {
        guard let context = self.context, !self.reported else { return }
        self.ending = .aborted(reason: reason)
        context.close(reset: reset)
    }

    private func write(_ bytes: ByteBuffer) {
        guard let context = self.context else { return }
        self.outbound.write(bytes, context: context, flusher: self)
    }

    func flushAtEndOfTick() {
        self.outbound.flushAtEndOfTick(self.context)
    }
}
