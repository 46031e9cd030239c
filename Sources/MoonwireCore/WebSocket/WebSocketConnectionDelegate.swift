import NIOCore
import NIOHTTP1

/// Receives the events of a ``WebSocketConnection``. Every method is called on the
/// connection's event loop, synchronously from the I/O that caused it, and may call back
/// into the connection (send, close, even re-dial from `didClose`).
///
/// Event order for one dial: either `didFail` alone (the connection never opened), or
/// `connectionDidOpen`, then messages and pongs, then exactly one `didClose`, preceded by
/// exactly one `didFail` when the peer broke the protocol.
///
/// ```swift
/// final class Echo: WebSocketConnectionDelegate {
///     func connectionDidOpen(_ c: WebSocketConnection, info: WebSocketOpenInfo) {}
///     func connection(_ c: WebSocketConnection, didReceive message: ByteBuffer, kind: WebSocketMessageKind) {
///         try? c.send(message, kind: kind)
///     }
///     func connection(_ c: WebSocketConnection, didFail error: WebSocketConnectionError) { print(error) }
///     func connection(_ c: WebSocketConnection, didClose info: WebSocketCloseInfo) { print(info) }
/// }
/// ```
public protocol WebSocketConnectionDelegate: AnyObject {
    /// The handshake succeeded; messages may be sent now.
    func connectionDidOpen(_ connection: WebSocketConnection, info: WebSocketOpenInfo)
    /// A complete, validated data message. `message` may share storage with the read
    /// buffer: copy what must outlive the call if that matters for memory.
    func connection(_ connection: WebSocketConnection, didReceive message: ByteBuffer, kind: WebSocketMessageKind)
    /// A pong arrived (pings are answered automatically).
    func connection(_ connection: WebSocketConnection, didReceivePong payload: ByteBuffer)
    /// Dialling failed, or the peer broke the protocol (`error.step == .protocol`).
    func connection(_ connection: WebSocketConnection, didFail error: WebSocketConnectionError)
    /// An open connection ended.
    func connection(_ connection: WebSocketConnection, didClose info: WebSocketCloseInfo)
}

extension WebSocketConnectionDelegate {
    /// Pongs are ignored unless the delegate wants them.
    public func connection(_ connection: WebSocketConnection, didReceivePong payload: ByteBuffer) {}
}

/// What the server agreed to when the connection opened.
public struct WebSocketOpenInfo: Sendable {
    /// The subprotocol the server chose, if any.
    public var subprotocol: String?
    /// The `101` response's headers.
    public var headers: HTTPHeaders
    /// The permessage-deflate parameters, when compression was negotiated.
    public var compression: PerMessageDeflateParameters?
    /// How long the dial's steps took (DNS, TCP, TLS, the upgrade).
    public var timing: ConnectTiming?
}

/// Counters of one connection object, across re-dials.
public struct WebSocketConnectionStats: Sendable, Hashable {
    /// Data messages sent.
    public var messagesSent = 0
    /// Data messages received.
    public var messagesReceived = 0
    /// Payload bytes of the messages sent (before compression).
    public var bytesSent = 0
    /// Payload bytes of the messages received (after decompression).
    public var bytesReceived = 0
}
