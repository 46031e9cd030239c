import NIOCore

/// Receives a ``MessageServer``'s events, on its loop, synchronously: each peer's as a
/// session's (``SessionDelegate``) and the server's own. For each peer: `didConnect`,
/// then its messages, then one `didClose`, preceded by one `didFail` when the peer broke
/// the protocol or the framing. Errors of connections that never became peers (a failed
/// TLS handshake) are the server's (`server(_:didFail:)`).
///
/// ```swift
/// final class Echo: MessageServerDelegate {
///     func server(_ s: MessageServer, didConnect peer: ServerPeer, request: ServerPeerRequest) {}
///     func session(_ peer: ServerPeer, didReceive m: ByteBuffer, kind: MessageKind) {
///         try? peer.send(m, kind: kind)
///     }
///     func session(_ peer: ServerPeer, didFail error: ConnectionError) {}
///     func session(_ peer: ServerPeer, didClose info: CloseInfo) {}
///     func server(_ s: MessageServer, accepting event: AcceptPause) {}
/// }
/// ```
public protocol MessageServerDelegate: SessionDelegate where Session == ServerPeer {
    /// A peer connected: the WebSocket handshake (or TLS) is done; it may be sent to now.
    func server(_ server: MessageServer, didConnect peer: ServerPeer, request: ServerPeerRequest)
    /// A connection that never became a peer failed (`.tls`), or listening failed.
    func server(_ server: MessageServer, didFail error: ConnectionError)
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
    public func server(_ server: MessageServer, didFail error: ConnectionError) {}
    public func server(_ server: MessageServer, peerDidDrain peer: ServerPeer) {}
    public func server(_ server: MessageServer, peerReachedBudget peer: ServerPeer) {}
}
