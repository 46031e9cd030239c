import NIOCore

/// Receives the events of a ``ClientConnection``, WebSocket or TCP. Every method is
/// called on the connection's event loop, synchronously from the I/O that caused it, and
/// may call back into the connection (send, close, even re-dial from `didClose`).
///
/// Event order for one dial: either `didFail` alone (the connection never opened), or
/// `connectionDidOpen`, then messages and pongs, then exactly one `didClose`, preceded by
/// exactly one `didFail` when the peer broke the protocol or the framing.
///
/// ```swift
/// final class Echo: ClientConnectionDelegate {
///     func connectionDidOpen(_ c: ClientConnection, info: ConnectionOpenInfo) {}
///     func connection(_ c: ClientConnection, didReceive message: ByteBuffer, kind: MessageKind) {
///         try? c.send(message, kind: kind)
///     }
///     func connection(_ c: ClientConnection, didFail error: ConnectionError) { print(error) }
///     func connection(_ c: ClientConnection, didClose info: CloseInfo) { print(info) }
/// }
/// ```
public protocol ClientConnectionDelegate: AnyObject {
    /// The dial is done (TCP connected, TLS done, the WebSocket upgrade accepted): messages
    /// may be sent now. `info` has only the timing for TCP.
    func connectionDidOpen(_ connection: ClientConnection, info: ConnectionOpenInfo)
    /// A complete, validated data message (TCP: as cut by the framing; kind is always
    /// binary). `message` may share storage with the read buffer: copy what must outlive
    /// the call if that matters for memory.
    func connection(_ connection: ClientConnection, didReceive message: ByteBuffer, kind: MessageKind)
    /// A WebSocket pong arrived (pings are answered automatically).
    func connection(_ connection: ClientConnection, didReceivePong payload: ByteBuffer)
    /// Dialling failed, or the peer broke the protocol or the framing (`error.step == .protocol`).
    func connection(_ connection: ClientConnection, didFail error: ConnectionError)
    /// An open connection ended.
    func connection(_ connection: ClientConnection, didClose info: CloseInfo)
}

extension ClientConnectionDelegate {
    /// Pongs are ignored unless the delegate wants them.
    public func connection(_ connection: ClientConnection, didReceivePong payload: ByteBuffer) {}
}
