import NIOCore

/// Receives the events of a ``ClientConnection``, WebSocket or TCP: those of every
/// session (``SessionDelegate``) and the client's own, the open and pongs. It may call
/// back into the connection, even re-dial from `didClose`.
///
/// Event order for one dial: either `didFail` alone (the connection never opened), or
/// `connectionDidOpen`, then messages and pongs, then exactly one `didClose`, preceded by
/// exactly one `didFail` when the peer broke the protocol or the framing.
///
/// ```swift
/// final class Echo: ClientConnectionDelegate {
///     func connectionDidOpen(_ c: ClientConnection, info: ConnectionOpenInfo) {}
///     func session(_ c: ClientConnection, didReceive message: ByteBuffer, kind: MessageKind) {
///         try? c.send(message, kind: kind)
///     }
///     func session(_ c: ClientConnection, didFail error: ConnectionError) { print(error) }
///     func session(_ c: ClientConnection, didClose info: CloseInfo) { print(info) }
/// }
/// ```
public protocol ClientConnectionDelegate: SessionDelegate where Session == ClientConnection {
    /// The dial is done (TCP connected, TLS done, the WebSocket upgrade accepted): messages
    /// may be sent now. `info` has only the timing for TCP.
    func connectionDidOpen(_ connection: ClientConnection, info: ConnectionOpenInfo)
    /// A WebSocket pong arrived (pings are answered automatically); ignored unless the
    /// delegate wants them.
    func connection(_ connection: ClientConnection, didReceivePong payload: ByteBuffer)
}

extension ClientConnectionDelegate {
    public func connection(_ connection: ClientConnection, didReceivePong payload: ByteBuffer) {}
}
