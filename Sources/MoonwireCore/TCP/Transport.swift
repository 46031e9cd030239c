import NIOCore

/// The states of a client transport; WebSocket and TCP connections share them.
public typealias TransportState = WebSocketConnection.State

/// Message and byte counters of a transport.
public typealias TransportStats = WebSocketConnectionStats

/// A message connection to one peer, whatever carries it: ``WebSocketConnection`` or
/// ``TCPConnection``. What a driver such as `ManagedConnection` needs to dial, use and
/// end a connection, and to re-dial it after a loss.
///
/// Everything happens on ``eventLoop``, delegate calls included, synchronously.
///
/// Close codes follow WebSocket's for both: a TCP connection reports 1000 for an orderly
/// end (FIN, either side), 1006 for a drop (reset, abort, heartbeat), and for a framing
/// error the code the WebSocket equivalent earns (1009 over a limit, else 1002).
///
/// ```swift
/// let transport: any Transport = try TransportURL("tcp://127.0.0.1:7000")
///     .makeTransport(eventLoop: loop, webSocket: WebSocketClientOptions(), tcp: TCPClientOptions())
/// transport.transportDelegate = events
/// try transport.dial(nil)
/// // later, from events.transportDidOpen:
/// try transport.send(ByteBuffer(string: "hello"), kind: .text)
/// ```
public protocol Transport: AnyObject {
    /// The loop everything happens on.
    var eventLoop: EventLoop { get }
    /// Where the current (or last) dial went.
    var transportURL: TransportURL { get }
    /// The current state.
    var state: TransportState { get }
    /// Counters since the object was created, across re-dials.
    var stats: TransportStats { get }
    /// The channel of the current dial (for the outbound budget and read pausing).
    var currentChannel: Channel? { get }
    /// Receives the events; held weakly.
    var transportDelegate: TransportDelegate? { get set }
    /// False when ``ping(_:)`` cannot work (TCP): heartbeats must use a message.
    var supportsPing: Bool { get }
    /// Starts a dial to `url` (same scheme family) or the previous URL; the outcome
    /// arrives as `transportDidOpen` or `didFail`. Throws when already dialling or open.
    func dial(_ url: TransportURL?) throws(WebSocketUsageError)
    /// Sends a whole message (TCP ignores `kind`). Throws when not open.
    func send(_ data: ByteBuffer, kind: WebSocketMessageKind) throws(WebSocketUsageError)
    /// Sends a whole message from bytes valid only for the duration of the call (a Lua
    /// string's): a transport that can frames them without an intermediate buffer.
    func send(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind) throws(WebSocketUsageError)
    /// The message as a finished frame made now from bytes valid only for the call, when
    /// the transport can make one that any later connection can carry as it is (an
    /// uncompressed, unfragmented, masked WebSocket frame); nil otherwise.
    func frame(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind) -> ByteBuffer?
    /// Adds one more frame, made now from bytes valid only for the call, at the end of
    /// `frames` (made by ``frame(bytes:kind:)``), when both are small enough to wait in one
    /// buffer; false when it does not.
    func appendFrame(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind, to frames: inout ByteBuffer) -> Bool
    /// Writes frames made by ``frame(bytes:kind:)`` (and ``appendFrame(bytes:kind:to:)``):
    /// `messages` messages of `payloadSize` payload bytes in all. Throws when not open.
    func sendFrame(_ frame: ByteBuffer, payloadSize: Int, messages: Int) throws(WebSocketUsageError)
    /// Sends a WebSocket ping; throws for TCP.
    func ping(_ payload: ByteBuffer) throws(WebSocketUsageError)
    /// Ends the connection in order (close handshake / FIN after pending writes).
    func close(code: UInt16, reason: String) throws(WebSocketUsageError)
    /// Drops the connection at once; an open one reports 1006 by network.
    func abort()
}

extension Transport {
    /// Copies the bytes into a buffer of their own and sends that (TCP, whose framing
    /// encodes from a buffer).
    public func send(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind) throws(WebSocketUsageError) {
        try self.send(ByteBuffer(bytes: bytes), kind: kind)
    }

    /// None: the message waits as a copy of its payload (TCP).
    public func frame(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind) -> ByteBuffer? { nil }

    /// Never: no frames to add to.
    public func appendFrame(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind, to frames: inout ByteBuffer) -> Bool { false }

    /// Never called for a transport that makes no frames.
    public func sendFrame(_ frame: ByteBuffer, payloadSize: Int, messages: Int) throws(WebSocketUsageError) {
        throw WebSocketUsageError("this transport sends no prepared frames")
    }
}

/// Receives a ``Transport``'s events, on its loop. Same order as
/// ``WebSocketConnectionDelegate``: either `didFail` alone, or `transportDidOpen`, then
/// messages (and pongs), then one `didClose`, preceded by one `didFail` when the peer broke
/// the protocol or the framing.
///
/// A `TransportDelegate` is also a ``WebSocketConnectionDelegate`` (the WebSocket events
/// are forwarded), so the same object can be set on either kind of connection.
///
/// ```swift
/// final class Events: TransportDelegate {
///     func transportDidOpen(_ t: any Transport, info: WebSocketOpenInfo) {}
///     func transport(_ t: any Transport, didReceive m: ByteBuffer, kind: WebSocketMessageKind) {}
///     func transport(_ t: any Transport, didFail error: WebSocketConnectionError) {}
///     func transport(_ t: any Transport, didClose info: WebSocketCloseInfo) {}
/// }
/// ```
public protocol TransportDelegate: WebSocketConnectionDelegate {
    /// The connection is open (TCP: connected, TLS done); `info` is empty for TCP.
    func transportDidOpen(_ transport: any Transport, info: WebSocketOpenInfo)
    /// A whole message (TCP: as cut by the framing; kind is always binary).
    func transport(_ transport: any Transport, didReceive message: ByteBuffer, kind: WebSocketMessageKind)
    /// A pong (WebSocket only).
    func transport(_ transport: any Transport, didReceivePong payload: ByteBuffer)
    /// Dialling failed, or the peer broke the protocol or the framing.
    func transport(_ transport: any Transport, didFail error: WebSocketConnectionError)
    /// An open connection ended.
    func transport(_ transport: any Transport, didClose info: WebSocketCloseInfo)
}

extension TransportDelegate {
    /// Pongs are ignored unless the delegate wants them.
    public func transport(_ transport: any Transport, didReceivePong payload: ByteBuffer) {}

    public func connectionDidOpen(_ connection: WebSocketConnection, info: WebSocketOpenInfo) {
        self.transportDidOpen(connection, info: info)
    }
    public func connection(_ connection: WebSocketConnection, didReceive message: ByteBuffer, kind: WebSocketMessageKind) {
        self.transport(connection, didReceive: message, kind: kind)
    }
    public func connection(_ connection: WebSocketConnection, didReceivePong payload: ByteBuffer) {
        self.transport(connection, didReceivePong: payload)
    }
    public func connection(_ connection: WebSocketConnection, didFail error: WebSocketConnectionError) {
        self.transport(connection, didFail: error)
    }
    public func connection(_ connection: WebSocketConnection, didClose info: WebSocketCloseInfo) {
        self.transport(connection, didClose: info)
    }
}
