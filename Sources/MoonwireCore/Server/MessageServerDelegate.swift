import NIOCore

/// Receives a ``MessageServer``'s events, on its loop, synchronously. For each peer:
/// `didConnect`, then its messages, then one `didClose`, preceded by one `didFail` when
/// the peer broke the protocol or the framing. Errors of connections that never became
/// peers (a failed TLS handshake) come with a nil peer.
///
/// ```swift
/// final class Echo: MessageServerDelegate {
///     func server(_ s: MessageServer, didConnect peer: ServerPeer, request: ServerPeerRequest) {}
///     func server(_ s: MessageServer, peer: ServerPeer, didReceive m: ByteBuffer, kind: MessageKind) {
///         try? peer.send(m, kind: kind)
///     }
///     func server(_ s: MessageServer, peer: ServerPeer, didClose info: CloseInfo) {}
/// }
/// ```
public protocol MessageServerDelegate: AnyObject {
    /// A peer connected: the WebSocket handshake (or TLS) is done; it may be sent to now.
    func server(_ server: MessageServer, didConnect peer: ServerPeer, request: ServerPeerRequest)
    /// A whole message from a peer (TCP: as cut by the framing, kind binary).
    func server(_ server: MessageServer, peer: ServerPeer, didReceive message: ByteBuffer, kind: MessageKind)
    /// A peer's connection ended: its close code and reason (1006 when dropped).
    func server(_ server: MessageServer, peer: ServerPeer, didClose info: CloseInfo)
    /// A peer broke the protocol (`.protocol`, with the close code sent), or an incoming
    /// connection failed before it became a peer (`.tls`).
    func server(_ server: MessageServer, peer: ServerPeer?, didFail error: ConnectionError)
    /// A peer's `buffered` fell back under half its byte budget after reaching it (`on_drain`).
    func server(_ server: MessageServer, peerDidDrain peer: ServerPeer)
    /// A peer's outbound budget turned a message away for the first time.
    func server(_ server: MessageServer, peerReachedBudget peer: ServerPeer)
    /// The server could not accept a connection for want of descriptors (or memory) and
    /// pauses accepting, retrying by itself (``AcceptPause/paused(errno:)``), or it accepts
    /// again (``AcceptPause/resumed(after:retries:)``): once each per episode. Its
    /// `description` is the line to log.
    func server(_ server: MessageServer, accepting event: AcceptPause)
}

extension MessageServerDelegate {
    /// A peer's `buffered` fell back under half its byte budget after reaching it.
    public func server(_ server: MessageServer, peerDidDrain peer: ServerPeer) {}
    /// A peer's budget turned a message away for the first time.
    public func server(_ server: MessageServer, peerReachedBudget peer: ServerPeer) {}
    /// Errors are ignored unless the delegate wants them.
    public func server(_ server: MessageServer, peer: ServerPeer?, didFail error: ConnectionError) {}
}
