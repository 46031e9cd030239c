import NIOCore

/// A connection as its user sees it once it carries messages, whatever its role (a
/// client's ``ManagedConnection``, a server's ``ServerPeer``) and transport (WebSocket or
/// TCP): the operations both roles have, with one meaning. The scripting layer binds
/// the methods that `c:` and `peer:` share to this, once; what only one role has
/// (reconnecting, `ready`, fault injection) stays on the role's own type.
///
/// All of it must be used on the connection's event loop.
///
/// ```swift
/// func hello(_ session: MessageSession) {
///     let sent = ByteBuffer(string: "hello").withUnsafeReadableBytes { session.send(bytes: $0, kind: .text) }
///     if sent == .queueFull, session.isOverBudget { /* wait for the drain */ }
///     print(session.sessionStats.sent, session.sessionStats.buffered)
///     session.close(code: CloseCode.normal, reason: "bye")
/// }
/// ```
public protocol MessageSession: AnyObject {
    /// Sends a message from bytes valid only for the call: written now when the socket can
    /// take it, else queued within the send budget, else refused (``SendResult``).
    func send(bytes: UnsafeRawBufferPointer, kind: MessageKind) -> SendResult
    /// A WebSocket ping now; false when not open (or TCP, which has none: see ``supportsPing``).
    @discardableResult
    func ping(_ payload: ByteBuffer) -> Bool
    /// False for TCP: there is no ping.
    var supportsPing: Bool { get }
    /// Closes in order (the WebSocket close handshake, or FIN after what the socket took);
    /// returns how many queued messages it dropped. Throws for a code a close frame may
    /// not carry.
    @discardableResult
    func close(code: UInt16, reason: String) throws(UsageError) -> Int
    /// Answers the peer's probe (`auto_reply`): at once, ahead of the queue, within the
    /// byte budget; skipped when it does not fit or the connection is not open.
    func answerProbe(_ reply: ByteBuffer, kind: MessageKind)
    /// The counters `stats()` shows.
    var sessionStats: SessionStats { get }
    /// Messages flow (the handshake is done, no close has started).
    var isOpen: Bool { get }
    /// From the moment the budget turned a message away until `buffered` fell back under
    /// half of it: what `drain()` waits for.
    var isOverBudget: Bool { get }
    /// The last message turned away was turned away by the process-wide budget.
    var refusedByProcessBudget: Bool { get }
    /// Why the open transport refused the last message ``send(bytes:kind:)`` answered
    /// `.closed` for (a TCP framing cannot carry it), or nil.
    var lastRefusal: String? { get }
}

/// What a send did with the message.
public enum SendResult: Equatable, Sendable {
    case sent
    case queued
    /// The budget is full and its overflow rule is `error`; the message was not taken.
    case queueFull
    /// The message alone is larger than the byte budget; it was not taken.
    case tooLarge
    /// Closing or closed (or the open transport cannot carry it: ``MessageSession/lastRefusal``
    /// says why): nothing will be sent.
    case closed

    /// What the send budget's answer means to the sender.
    init(_ offer: OutboundBuffer.Offer) {
        switch offer {
        case .sent: self = .sent
        case .queued, .dropped: self = .queued
        case .full: self = .queueFull
        case .tooLarge: self = .tooLarge
        case .unsendable: self = .closed
        }
    }
}

/// The counters of one connection in either role, as `c:stats()` and `peer:stats()`
/// show them. What only a client has is nil for a peer.
public struct SessionStats: Sendable {
    public var sent = 0
    public var received = 0
    public var bytesSent = 0
    public var bytesReceived = 0
    /// Messages waiting in the queue (connection down, or the socket full).
    public var queued = 0
    /// Bytes waiting: the queue plus what the socket has not taken yet.
    public var buffered = 0
    public var dropped = 0
    /// The peer's probes answered by `auto_reply` (or ``MessageSession/answerProbe(_:kind:)``).
    public var autoReplies = 0
    /// The heartbeat's last round trip, in seconds.
    public var lastRTT: Double?
    /// A client's reconnects (nil for a server's peer).
    public var reconnects: Int?
    /// The steps of a client's last dial that opened.
    public var connectTiming: ConnectTiming?

    public init() {}

    /// The counters every connection has: its messages, its send budget, its probes.
    init(_ messages: ConnectionStats, outbound: OutboundBuffer, autoReplies: Int, lastRTT: TimeAmount?) {
        self.sent = messages.messagesSent
        self.received = messages.messagesReceived
        self.bytesSent = messages.bytesSent
        self.bytesReceived = messages.bytesReceived
        self.queued = outbound.queued
        self.buffered = outbound.buffered
        self.dropped = outbound.dropped
        self.autoReplies = autoReplies
        self.lastRTT = lastRTT.map { Double($0.nanoseconds) / 1e9 }
    }
}
