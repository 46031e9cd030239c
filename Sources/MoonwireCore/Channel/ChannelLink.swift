import NIOCore

/// The handler that carries an open connection's messages, in either role: one type for a
/// client's (``ClientConnection``) and a server peer's (``ServerPeer``), so that what depends
/// on the transport is decided here, once, and not in each role.
enum ChannelLink<Owner: ChannelOwner> {
    case webSocket(WebSocketHandler<Owner>)
    case tcp(FramedChannelHandler)

    /// True while messages may be sent.
    var isOpen: Bool {
        switch self {
        case .webSocket(let handler): handler.isOpen
        case .tcp(let handler): handler.isOpen
        }
    }

    /// The compression state a WebSocket negotiated, if any.
    var deflate: PerMessageDeflate? {
        if case .webSocket(let handler) = self { return handler.deflate }
        return nil
    }

    /// What the outbound budget writes to.
    var outbound: OutboundLink? {
        switch self {
        case .webSocket(let handler): Owner.budgetLink(handler)
        case .tcp(let handler): .tcp(handler)
        }
    }

    /// Writes a whole message now (TCP: framed by its framing; `kind` is ignored).
    func send(_ data: ByteBuffer, kind: MessageKind) throws(UsageError) {
        switch self {
        case .webSocket(let handler): try handler.send(data, kind: kind)
        case .tcp(let handler): try handler.send(data)
        }
    }

    /// A WebSocket ping now; TCP has none.
    func ping(_ payload: ByteBuffer) throws(UsageError) {
        guard case .webSocket(let handler) = self else { throw .noPing }
        try handler.ping(payload)
    }

    /// The close frame for `code` and `reason` on a WebSocket, nil for TCP (where they are
    /// only reported); throws for one a close frame may not carry.
    func closeFrame(code: UInt16, reason: String) throws(UsageError) -> WebSocketClose? {
        guard case .webSocket = self else { return nil }
        do {
            return try WebSocketClose(code: Int(code), reason: reason)
        } catch {
            throw .control(error)
        }
    }

    /// Starts the close: the WebSocket handshake with `frame`, or for TCP FIN once what
    /// was written went out, reported with `code` and `reason`.
    func close(_ frame: WebSocketClose?, code: UInt16, reason: String) {
        switch self {
        case .webSocket(let handler): if let frame { handler.close(frame) }
        case .tcp(let handler): handler.close(code: code, reason: reason)
        }
    }

    /// Drops the connection without a close handshake (RST with `reset`), reported as 1006.
    func abort(reset: Bool, reason: String) {
        switch self {
        case .webSocket(let handler): handler.abort(reset: reset, reason: reason)
        case .tcp(let handler): handler.abort(reset: reset, reason: reason)
        }
    }
}
