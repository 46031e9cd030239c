import NIOCore

/// What one role does with what the peer sent. ``readFrames(_:)`` is the read loop the
/// client's ``WebSocketChannelHandler`` and the server's ``WebSocketPeerHandler`` share:
/// the same ``WebSocketInbound`` steps for both, only the reactions differ.
protocol WebSocketInboundHandling: AnyObject {
    /// The connection's frame parser and message assembler.
    var inbound: WebSocketInbound { get set }
    /// True once the outcome is decided (failure, close handshake): later input is ignored.
    var discarding: Bool { get }

    func received(_ message: ByteBuffer, kind: WebSocketMessageKind)
    func receivedPing(_ payload: ByteBuffer)
    func receivedPong(_ payload: ByteBuffer)
    func receivedClose(code: UInt16?, reason: String)
    /// The peer broke the protocol: fail the connection with the violation's code.
    func protocolViolation(_ violation: WebSocketProtocolViolation)
}

extension WebSocketInboundHandling {
    /// Acts on everything complete in one read, until it needs more bytes or the outcome is
    /// decided. Inlined into each handler's `channelRead`, so the calls to the reactions
    /// are as direct as when each handler had its own copy of this loop.
    @inline(__always)
    func readFrames(_ buffer: inout ByteBuffer) {
        while !self.discarding {
            let action: WebSocketMessageAssembler.Action
            do {
                guard let next = try self.inbound.next(&buffer) else { return }
                action = next
            } catch {
                self.protocolViolation(error)
                return
            }
            switch action {
            case .none:
                break
            case .message(let message, let kind):
                self.received(message, kind: kind)
            case .ping(let payload):
                self.receivedPing(payload)
            case .pong(let payload):
                self.receivedPong(payload)
            case .close(let code, let reason):
                self.receivedClose(code: code, reason: reason)
            }
        }
    }
}
