import NIOCore

/// What a channel handler (``WebSocketHandler`` or ``FramedChannelHandler``) tells the
/// object it works for: the client's ``ClientConnection`` or the server's ``ServerPeer``,
/// whichever the transport. One protocol for both roles and both transports; called on
/// the channel's loop.
protocol ChannelOwner: AnyObject {
    /// A whole message (TCP: one the framing cut out, always binary).
    func handlerReceived(_ message: ByteBuffer, kind: MessageKind)
    /// The peer pinged (the pong is on its way): it is alive. WebSocket only.
    func handlerReceivedPing()
    /// A pong arrived. WebSocket only.
    func handlerReceivedPong(_ payload: ByteBuffer)
    /// The peer broke the protocol or the framing; the close report follows.
    func handlerFailed(_ error: ConnectionError)
    /// The connection ended; called exactly once.
    func handlerClosed(_ info: CloseInfo)
    /// TCP is up (an accepted TCP connection becomes active after its pipeline is set up).
    func handlerBecameActive()
    /// The owner's WebSocket handler as the outbound budget writes to it (a concrete case
    /// per role: no generic call on the message path); nil for an owner without a budget.
    static func budgetLink(_ handler: WebSocketHandler<Self>) -> OutboundLink?
}

extension ChannelOwner {
    func handlerReceivedPing() {}
    func handlerReceivedPong(_ payload: ByteBuffer) {}
    func handlerBecameActive() {}
    static func budgetLink(_ handler: WebSocketHandler<Self>) -> OutboundLink? { nil }
}
