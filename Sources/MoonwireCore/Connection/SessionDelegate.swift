import NIOCore

/// The events of one connection's messages, whatever its role: a client's
/// ``ClientConnection`` or a server's ``ServerPeer`` (`Session`). Declared once here; each
/// role's delegate adds what only that role has (``ClientConnectionDelegate``: the open
/// and pongs; ``MessageServerDelegate``: the server's own events). Every method is
/// called on the connection's event loop, synchronously from the I/O that caused it, and
/// may call back into the connection (send, close).
///
/// Event order for one connection: its messages, then exactly one `didClose`, preceded by
/// exactly one `didFail` when the peer broke the protocol or the framing (a client's
/// failed dial reports `didFail` alone).
public protocol SessionDelegate<Session>: AnyObject {
    associatedtype Session: AnyObject
    /// A complete, validated data message (TCP: as cut by the framing; kind is always
    /// binary). `message` may share storage with the read buffer: copy what must outlive
    /// the call if that matters for memory.
    func session(_ session: Session, didReceive message: ByteBuffer, kind: MessageKind)
    /// The peer broke the protocol or the framing (`error.step == .protocol`, with the close
    /// code sent), or a client's dial failed.
    func session(_ session: Session, didFail error: ConnectionError)
    /// An open connection ended: its close code and reason (1006 when dropped).
    func session(_ session: Session, didClose info: CloseInfo)
}
