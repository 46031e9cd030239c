import NIOCore

/// What a ``WebSocketPeerHandler`` tells its ``ServerPeer``.
protocol WebSocketPeerOwner: AnyObject {
    func webSocketPeerReceived(_ message: ByteBuffer, kind: WebSocketMessageKind)
    func webSocketPeerReceivedPing()
    func webSocketPeerReceivedPong(_ payload: ByteBuffer)
    /// The client broke the protocol; the close report follows.
    func webSocketPeerFailed(_ violation: WebSocketProtocolViolation)
    /// The connection ended; called exactly once.
    func webSocketPeerClosed(_ info: WebSocketCloseInfo)
}

/// The server side of one upgraded WebSocket: parses frames with the client's streaming
/// ``WebSocketFrameParser`` in the server role (client frames must be masked and are
/// unmasked as they stream in), assembles messages with the same
/// ``WebSocketMessageAssembler`` (continuations, fail-fast UTF-8, `max_message`,
/// compression), answers pings and runs the close handshake with the same
/// ``WebSocketCloseStateMachine``. Writes go out as ready-made unmasked frames through the
/// ``RawOutlet``, so raw bytes can be written around this handler.
///
/// Unlike a client, a server closes TCP as soon as the close handshake is over (RFC 6455
/// §7.1.1), and right after echoing a client's close.
final class WebSocketPeerHandler: ChannelInboundHandler, RemovableChannelHandler, WebSocketInboundHandling, WebSocketCloseHandling, EndOfTickFlushing {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    var inbound: WebSocketInbound
    var closing = WebSocketCloseStateMachine()
    private(set) var deflate: PerMessageDeflate?
    let closeTimeout: TimeAmount
    private weak var owner: WebSocketPeerOwner?
    /// Where frames are written.
    let outlet: RawOutlet
    private(set) var context: ChannelHandlerContext?
    var discarding = false
    private var flushes = FlushBatching()
    var closeTimer: ClockTask?

    init(maxMessage: Int, deflate: PerMessageDeflate?, closeTimeout: TimeAmount, outlet: RawOutlet, owner: WebSocketPeerOwner) {
        self.outlet = outlet
        self.inbound = WebSocketInbound(role: .server, maxMessage: maxMessage, deflate: deflate)
        self.deflate = deflate
        self.closeTimeout = closeTimeout
        self.owner = owner
    }

    /// True while messages may be sent.
    var isOpen: Bool {
        if case .open = self.closing.state, self.context != nil { return true }
        return false
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.closeTimer?.cancel()
        // The peer outlives its connection while a script holds it, which for a Lua script
        // means until the garbage collector gets to it (it sees a small userdata, not what
        // hangs off it): let go now of a message being assembled (up to 1 MiB reserved) and
        // of the zlib streams (~300 KiB), which kept a server under attack at tens of MiB.
        self.inbound = WebSocketInbound(role: .server, maxMessage: self.inbound.maxMessage, deflate: nil)
        self.deflate = nil
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = self.unwrapInboundIn(data)
        self.flushes.readStarted()
        self.readFrames(&buffer)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.flushes.readEnded() {
            self.outlet.flush()
        }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Resets and TLS truncation end the transport; channelInactive reports the outcome.
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.closeTimer?.cancel()
        if let info = self.closing.transportClosed() {
            self.report(info)
        }
        context.fireChannelInactive()
    }

    func received(_ message: ByteBuffer, kind: WebSocketMessageKind) {
        self.owner?.webSocketPeerReceived(message, kind: kind)
    }

    func receivedPing(_ payload: ByteBuffer) {
        self.owner?.webSocketPeerReceivedPing()
        guard let context = self.context, case .open = self.closing.state else { return }
        self.write(WebSocketServerFrame.encode(opcode: 0xA, payload: payload, allocator: context.channel.allocator))
    }

    func receivedPong(_ payload: ByteBuffer) {
        self.owner?.webSocketPeerReceivedPong(payload)
    }

    func receivedClose(code: UInt16?, reason: String) {
        self.perform(self.closing.peerClosed(code: code, reason: reason))
    }

    /// Fails the connection (RFC 6455 §7.1.7): our close frame goes out and, as nothing more
    /// from the client may be processed, the server ends TCP once it is flushed; the report
    /// (our code, not clean) follows when the channel goes inactive.
    func protocolViolation(_ violation: WebSocketProtocolViolation) {
        let action = self.closing.protocolViolation(violation)
        self.discarding = true
        if case .sendClose = action {
            self.owner?.webSocketPeerFailed(violation)
            self.perform(action)
            self.closeHandshakeEnded()
        } else {
            self.perform(action)
        }
    }

    // MARK: Outbound

    /// Sends a whole message, compressed when negotiated and worth it.
    func send(_ data: ByteBuffer, kind: WebSocketMessageKind) throws(WebSocketUsageError) {
        guard let context = self.context, case .open = self.closing.state else {
            throw WebSocketUsageError("connection is not open")
        }
        self.write(try Self.frame(data, kind: kind, deflate: self.deflate, allocator: context.channel.allocator))
    }

    /// The frame for a message; compressed frames are specific to one peer's deflate state.
    static func frame(_ data: ByteBuffer, kind: WebSocketMessageKind, deflate: PerMessageDeflate?, allocator: ByteBufferAllocator) throws(WebSocketUsageError) -> ByteBuffer {
        let opcode = kind.opcode
        guard let deflate, deflate.shouldCompress(data.readableBytes) else {
            return WebSocketServerFrame.encode(opcode: opcode, payload: data, allocator: allocator)
        }
        var compressed: ByteBuffer
        do {
            compressed = try deflate.deflate(data, isFinal: true, headroom: WebSocketServerFrame.maxHeaderSize, allocator: allocator)
        } catch {
            throw WebSocketUsageError("compression failed: \(error)")
        }
        WebSocketServerFrame.frameInPlace(opcode: opcode, fin: true, rsv1: true, buffer: &compressed)
        return compressed
    }

    /// Writes a frame encoded elsewhere (a broadcast's shared buffer).
    func writeEncoded(_ frame: ByteBuffer) throws(WebSocketUsageError) {
        guard self.isOpen else { throw WebSocketUsageError("connection is not open") }
        self.write(frame)
    }

    func ping(_ payload: ByteBuffer) throws(WebSocketUsageError) {
        guard let context = self.context, case .open = self.closing.state else {
            throw WebSocketUsageError("connection is not open")
        }
        guard payload.readableBytes <= 125 else { throw WebSocketUsageError("ping payload longer than 125 bytes") }
        self.write(WebSocketServerFrame.encode(opcode: 0x9, payload: payload, allocator: context.channel.allocator))
    }

    func close(code: UInt16, reason: String) {
        self.perform(self.closing.closeRequested(code: code, reason: reason))
    }

    /// Drops the connection without a close frame; with `reset`, RST instead of FIN.
    func abort(reset: Bool, reason: String) {
        guard let context = self.context else { return }
        guard case .drop(var info) = self.closing.aborted() else { return }
        self.discarding = true
        info.reason = reason
        self.report(info)
        context.close(reset: reset)
    }

    private func write(_ frame: ByteBuffer) {
        guard let context = self.context else { return }
        self.outlet.write(frame, promise: nil)
        self.flushes.wrote(self, loop: context.eventLoop)
    }

    func flushAtEndOfTick() {
        self.flushes.scheduledFlushRuns()
        self.outlet.flush()
    }

    // MARK: Close handshake

    func writeClose(code: UInt16?, reason: String) {
        guard let context = self.context else { return }
        let payload = Self.closePayload(code: code, reason: reason, allocator: context.channel.allocator)
        self.write(WebSocketServerFrame.encode(opcode: 0x8, payload: payload, allocator: context.channel.allocator))
    }

    /// The server ends TCP once the handshake is over, after the last frame went out.
    func closeHandshakeEnded() {
        guard let context = self.context else { return }
        let flushed = context.eventLoop.makePromise(of: Void.self)
        self.outlet.write(ByteBuffer(), promise: flushed)
        self.outlet.flush()
        flushed.futureResult.assumeIsolated().whenComplete { _ in self.context?.close(promise: nil) }
        self.armCloseTimer()
    }

    func report(_ info: WebSocketCloseInfo) {
        let owner = self.owner
        self.owner = nil
        owner?.webSocketPeerClosed(info)
    }
}
