import NIOCore

/// The open WebSocket on the channel: parses and assembles what the server sends, answers
/// pings, runs the close handshake, and frames what we send. Owned by one
/// ``WebSocketConnection`` for the life of one dial; everything runs on the channel's loop.
final class WebSocketChannelHandler: ChannelDuplexHandler, RemovableChannelHandler, WebSocketInboundHandling, WebSocketCloseHandling, EndOfTickFlushing {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Messages up to this size are framed into one shared buffer (``gathered``) rather
    /// than a buffer each: a burst of small messages then costs the channel one write.
    static let gatherMessageLimit = 4096
    /// ``gathered`` goes to the channel once it holds this much, so what the channel's
    /// water marks (and `buffered`) do not see yet stays small.
    static let gatherBufferLimit = 64 * 1024

    var inbound: WebSocketInbound
    var closing = WebSocketCloseStateMachine()
    private var writer = WebSocketFrameWriter()
    private let deflate: PerMessageDeflate?
    let closeTimeout: TimeAmount
    private let fragmentSize: Int?
    private var connection: WebSocketConnection?
    private(set) var context: ChannelHandlerContext?
    var discarding = false
    /// Inside channelRead: writes are flushed once, in channelReadComplete.
    private var flushes = FlushBatching()
    /// Small frames made since the last write to the channel, in order: written ahead of
    /// any other frame and at every flush.
    private var gathered: ByteBuffer?
    var closeTimer: ClockTask?
    /// The kind and compression of an outbound message being sent in fragments.
    private var outboundMessage: (kind: WebSocketMessageKind, compressed: Bool)?

    init(connection: WebSocketConnection, options: WebSocketClientOptions, deflate: PerMessageDeflate?) {
        self.connection = connection
        self.inbound = WebSocketInbound(role: .client, maxMessage: options.maxMessage, deflate: deflate)
        self.deflate = deflate
        self.closeTimeout = options.closeTimeout
        self.fragmentSize = options.fragmentSize.map { max(1, $0) }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.gathered = nil
        self.closeTimer?.cancel()
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = self.unwrapInboundIn(data)
        self.flushes.readStarted()
        self.readFrames(&buffer)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.flushes.readEnded() {
            self.writeGathered(context)
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.closeTimer?.cancel()
        if let info = self.closing.transportClosed() {
            self.report(info)
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Resets and TLS truncation end the transport; channelInactive reports the outcome.
        context.close(promise: nil)
    }

    func received(_ message: ByteBuffer, kind: WebSocketMessageKind) {
        self.connection?.handlerReceived(message, kind: kind)
    }

    func receivedPing(_ payload: ByteBuffer) {
        guard let context = self.context, case .open = self.closing.state else { return }
        self.write(self.writer.frame(opcode: 0xA, payload: payload, allocator: context.channel.allocator))
    }

    func receivedPong(_ payload: ByteBuffer) {
        self.connection?.handlerReceivedPong(payload)
    }

    func receivedClose(code: UInt16?, reason: String) {
        self.perform(self.closing.peerClosed(code: code, reason: reason))
    }

    func protocolViolation(_ violation: WebSocketProtocolViolation) {
        let action = self.closing.protocolViolation(violation)
        self.discarding = true
        if case .sendClose = action {
            self.connection?.handlerFailed(.protocolViolation(violation))
        }
        self.perform(action)
    }

    // MARK: Outbound

    /// Sends a whole message, compressed and fragmented as configured.
    func send(_ data: ByteBuffer, kind: WebSocketMessageKind) throws(WebSocketUsageError) {
        guard let context = self.context, case .open = self.closing.state else {
            throw WebSocketUsageError("connection is not open")
        }
        guard self.outboundMessage == nil else {
            throw WebSocketUsageError("a fragmented message is being sent; finish it first")
        }
        let opcode = kind.opcode
        if let deflate = self.deflate, deflate.shouldCompress(data.readableBytes) {
            var compressed = try self.compress(data, deflate: deflate, isFinal: true, allocator: context.channel.allocator)
            if let size = self.fragmentSize, compressed.readableBytes > size {
                self.writeFragmented(&compressed, opcode: opcode, rsv1: true, size: size, allocator: context.channel.allocator)
            } else {
                self.writer.frameInPlace(opcode: opcode, fin: true, rsv1: true, buffer: &compressed)
                self.write(compressed)
            }
        } else if let size = self.fragmentSize, data.readableBytes > size {
            var data = data
            self.writeFragmented(&data, opcode: opcode, rsv1: false, size: size, allocator: context.channel.allocator)
        } else {
            self.write(self.writer.frame(opcode: opcode, payload: data, allocator: context.channel.allocator))
        }
    }

    /// Sends a whole message from bytes the caller owns for the duration of the call (a
    /// Lua string): framed and masked straight from them when it goes out as one
    /// uncompressed frame, else through ``send(_:kind:)``.
    func send(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind) throws(WebSocketUsageError) {
        guard let context = self.context, case .open = self.closing.state, self.outboundMessage == nil,
            self.goesAsOnePlainFrame(bytes.count)
        else {
            return try self.send(ByteBuffer(bytes: bytes), kind: kind)
        }
        let opcode = kind.opcode
        guard bytes.count <= Self.gatherMessageLimit else {
            self.write(self.writer.frame(opcode: opcode, payload: bytes, allocator: context.channel.allocator))
            return
        }
        self.gather(context, size: WebSocketFrameWriter.maxHeaderSize + bytes.count) { gathered in
            self.writer.append(opcode: opcode, payload: bytes, to: &gathered)
        }
    }

    /// Adds a frame to ``gathered`` (`size` bytes at most) with `append`.
    private func gather(_ context: ChannelHandlerContext, size: Int, _ append: (inout ByteBuffer) -> Void) {
        var gathered = self.gathered.take() ?? context.channel.allocator.buffer(capacity: max(512, size))
        append(&gathered)
        if gathered.readableBytes >= Self.gatherBufferLimit {
            context.write(self.wrapOutboundOut(gathered), promise: nil)
        } else {
            self.gathered = gathered
        }
        self.scheduleFlush(context)
    }

    /// True when a message of `size` bytes goes out as one uncompressed frame (not
    /// compressed by permessage-deflate, not cut into fragments).
    private func goesAsOnePlainFrame(_ size: Int) -> Bool {
        !(self.deflate?.shouldCompress(size) ?? false) && size <= self.fragmentSize ?? .max
    }

    /// A whole message as one masked frame made now from the caller's bytes, for a message
    /// that has to wait in the send queue: nil when it would be compressed or fragmented
    /// (those depend on the connection that sends it). An uncompressed frame is valid on
    /// any later connection too, with or without permessage-deflate.
    func frame(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind) -> ByteBuffer? {
        guard let context = self.context, self.goesAsOnePlainFrame(bytes.count) else { return nil }
        return self.writer.frame(opcode: kind.opcode, payload: bytes, allocator: context.channel.allocator)
    }

    /// Adds a frame made now from `bytes` at the end of `frames` (made by
    /// ``frame(bytes:kind:)``), when the message is one this handler would gather and
    /// `frames` stays within what it gathers into one buffer; false otherwise.
    func appendFrame(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind, to frames: inout ByteBuffer) -> Bool {
        guard self.context != nil, bytes.count <= Self.gatherMessageLimit,
            frames.readableBytes + WebSocketFrameWriter.maxHeaderSize + bytes.count <= Self.gatherBufferLimit,
            self.goesAsOnePlainFrame(bytes.count)
        else { return false }
        self.writer.append(opcode: kind.opcode, payload: bytes, to: &frames)
        return true
    }

    /// Writes a frame made by ``frame(bytes:kind:)``.
    func sendFrame(_ frame: ByteBuffer) throws(WebSocketUsageError) {
        guard self.context != nil, case .open = self.closing.state else {
            throw WebSocketUsageError("connection is not open")
        }
        guard self.outboundMessage == nil else {
            throw WebSocketUsageError("a fragmented message is being sent; finish it first")
        }
        if let context = self.context, frame.readableBytes <= WebSocketFrameWriter.maxHeaderSize + Self.gatherMessageLimit {
            self.gather(context, size: frame.readableBytes) { gathered in
                var frame = frame
                gathered.writeBuffer(&frame)
            }
        } else {
            self.write(frame)
        }
    }

    /// Sends one fragment of a message whose size the caller does not know up front.
    func sendFragment(_ data: ByteBuffer, kind: WebSocketMessageKind, isFinal: Bool) throws(WebSocketUsageError) {
        guard let context = self.context, case .open = self.closing.state else {
            throw WebSocketUsageError("connection is not open")
        }
        let first = self.outboundMessage == nil
        if let current = self.outboundMessage, current.kind != kind {
            throw WebSocketUsageError("fragment of a \(kind) message while a \(current.kind) message is being sent")
        }
        let compressed = self.outboundMessage?.compressed ?? (self.deflate?.canCompress ?? false)
        self.outboundMessage = isFinal ? nil : (kind, compressed)
        let opcode: UInt8 = first ? kind.opcode : 0x0
        if compressed, let deflate = self.deflate {
            var payload = try self.compress(data, deflate: deflate, isFinal: isFinal, allocator: context.channel.allocator)
            self.writer.frameInPlace(opcode: opcode, fin: isFinal, rsv1: first, buffer: &payload)
            self.write(payload)
        } else {
            self.write(self.writer.frame(opcode: opcode, fin: isFinal, payload: data, allocator: context.channel.allocator))
        }
    }

    func ping(_ payload: ByteBuffer) throws(WebSocketUsageError) {
        guard let context = self.context, case .open = self.closing.state else {
            throw WebSocketUsageError("connection is not open")
        }
        guard payload.readableBytes <= 125 else { throw WebSocketUsageError("ping payload longer than 125 bytes") }
        self.write(self.writer.frame(opcode: 0x9, payload: payload, allocator: context.channel.allocator))
    }

    func close(code: UInt16, reason: String) {
        self.perform(self.closing.closeRequested(code: code, reason: reason))
    }

    func abort() {
        self.perform(self.closing.aborted())
    }

    private func compress(
        _ data: ByteBuffer,
        deflate: PerMessageDeflate,
        isFinal: Bool,
        allocator: ByteBufferAllocator
    ) throws(WebSocketUsageError) -> ByteBuffer {
        do {
            return try deflate.deflate(data, isFinal: isFinal, headroom: WebSocketFrameWriter.maxHeaderSize, allocator: allocator)
        } catch {
            throw WebSocketUsageError("compression failed: \(error)")
        }
    }

    private func writeFragmented(_ data: inout ByteBuffer, opcode: UInt8, rsv1: Bool, size: Int, allocator: ByteBufferAllocator) {
        var first = true
        while data.readableBytes > 0 {
            let piece = data.readSlice(length: min(size, data.readableBytes))!
            let frame = self.writer.frame(
                opcode: first ? opcode : 0x0,
                fin: data.readableBytes == 0,
                rsv1: first && rsv1,
                payload: piece,
                allocator: allocator
            )
            self.write(frame)
            first = false
        }
    }

    private func write(_ frame: ByteBuffer) {
        guard let context = self.context else { return }
        self.writeGathered(context)
        context.write(self.wrapOutboundOut(frame), promise: nil)
        self.scheduleFlush(context)
    }

    /// Flushes at the end of the read (inside channelRead) or of this loop tick.
    private func scheduleFlush(_ context: ChannelHandlerContext) {
        self.flushes.wrote(self, loop: context.eventLoop)
    }

    func flushAtEndOfTick() {
        self.flushes.scheduledFlushRuns()
        guard let context = self.context else { return }
        self.writeGathered(context)
        context.flush()
    }

    /// Hands the gathered small frames to the channel.
    private func writeGathered(_ context: ChannelHandlerContext) {
        if let gathered = self.gathered.take() {
            context.write(self.wrapOutboundOut(gathered), promise: nil)
        }
    }

    // MARK: Outbound from the channel

    /// A write from outside this handler goes after the frames gathered before it.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.writeGathered(context)
        context.write(data, promise: promise)
    }

    /// A flush from outside (the send budget's) writes the gathered frames too.
    func flush(context: ChannelHandlerContext) {
        self.writeGathered(context)
        context.flush()
    }

    // MARK: Close handshake

    func writeClose(code: UInt16?, reason: String) {
        guard let context = self.context else { return }
        let payload = Self.closePayload(code: code, reason: reason, allocator: context.channel.allocator)
        self.write(self.writer.frame(opcode: 0x8, payload: payload, allocator: context.channel.allocator))
    }

    /// The server ends TCP (RFC 6455 §7.1.1); the close timer drops it if it does not.
    func closeHandshakeEnded() {
        self.armCloseTimer()
    }

    func report(_ info: WebSocketCloseInfo) {
        let connection = self.connection
        self.connection = nil
        connection?.handlerClosed(info)
    }
}
