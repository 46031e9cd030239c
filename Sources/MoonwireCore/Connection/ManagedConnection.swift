import NIOCore
import NIOHTTP1

/// What the script sees of a connection's life, reported by `ManagedConnection`.
public protocol ManagedConnectionDelegate: AnyObject {
    /// Opened (first time or after a reconnect). Queued messages are flushed right
    /// after this returns, so what the delegate sends here goes first.
    func managedConnectionDidOpen(_ connection: ManagedConnection, info: ManagedConnection.OpenInfo)
    func managedConnection(_ connection: ManagedConnection, didReceive message: ByteBuffer, kind: WebSocketMessageKind)
    func managedConnection(_ connection: ManagedConnection, didFail error: String)
    func managedConnection(_ connection: ManagedConnection, didClose info: ManagedConnection.CloseInfo)
}

/// A long-lived client connection as the scripting API presents it: a
/// WebSocket connection plus the send queue used while it is not open.
///
/// All methods must be called on `eventLoop`; delegate calls happen there.
///
/// ```swift
/// let c = ManagedConnection(url: try WebSocketURL("ws://127.0.0.1:9000/"), options: .init(), eventLoop: loop)
/// c.delegate = bot
/// c.start()
/// _ = c.send(ByteBuffer(string: "hello"), kind: .text)   // queued until open
/// ```
public final class ManagedConnection {
    public struct OpenInfo {
        public var subprotocol: String?
        public var headers: HTTPHeaders
        public var reconnects: Int
    }

    public struct CloseInfo {
        public var code: UInt16
        public var reason: String
        public var clean: Bool
        public var by: WebSocketCloseInfo.Initiator
        public var willReconnect: Bool
    }

    public enum SendResult: Equatable {
        case sent
        case queued
        /// The queue is full and its overflow rule is `error`; the message was not taken.
        case queueFull
        /// Closed for good: nothing will ever be sent.
        case closed
    }

    public struct Stats {
        public var sent = 0
        public var received = 0
        public var bytesSent = 0
        public var bytesReceived = 0
        public var reconnects = 0
        public var queued = 0
        public var dropped = 0
        public var lastRTT: Double?
    }

    public let eventLoop: EventLoop
    public weak var delegate: ManagedConnectionDelegate?
    private let socket: WebSocketConnection
    private let events: Events
    private var queue: [(ByteBuffer, WebSocketMessageKind)] = []
    public var queueLimit = 1024
    private var dropped = 0
    private var closedForGood = false

    public init(url: WebSocketURL, options: WebSocketClientOptions, eventLoop: EventLoop) {
        self.eventLoop = eventLoop
        socket = WebSocketConnection(url: url, options: options, eventLoop: eventLoop)
        events = Events()
        events.owner = self
        socket.delegate = events
    }

    /// "connecting" | "open" | "closing" | "closed" | "reconnecting"
    public var state: String {
        switch socket.state {
        case .idle, .connecting: return closedForGood ? "closed" : "connecting"
        case .open: return "open"
        case .closing: return "closing"
        case .closed: return "closed"
        }
    }

    /// Alive: open, or on its way to be (keeps `moonwire run` going).
    public var isAlive: Bool { !closedForGood }

    public var stats: Stats {
        let s = socket.stats
        return Stats(
            sent: s.messagesSent, received: s.messagesReceived, bytesSent: s.bytesSent, bytesReceived: s.bytesReceived,
            reconnects: 0, queued: queue.count, dropped: dropped, lastRTT: nil
        )
    }

    public func start() {
        do {
            try socket.connect()
        } catch {
            finish(error: "\(error)")
        }
    }

    public func send(_ data: ByteBuffer, kind: WebSocketMessageKind) -> SendResult {
        if closedForGood { return .closed }
        if socket.state == .open {
            do {
                try socket.send(data, kind: kind)
                return .sent
            } catch {
                return .closed
            }
        }
        guard queue.count < queueLimit else { return .queueFull }
        queue.append((data, kind))
        return .queued
    }

    public func ping(_ payload: ByteBuffer) -> Bool {
        (try? socket.ping(payload)) != nil
    }

    /// A deliberate close: no reconnect afterwards. Returns how many queued messages it dropped.
    @discardableResult
    public func close(code: UInt16, reason: String) -> Int {
        let droppedNow = queue.count
        queue.removeAll()
        dropped += droppedNow
        switch socket.state {
        case .open:
            closedForGood = true
            try? socket.close(code: code, reason: reason)
        case .connecting, .idle:
            closedForGood = true
            socket.abort()
        case .closing, .closed:
            closedForGood = true
        }
        return droppedNow
    }

    private func finish(error: String) {
        closedForGood = true
        dropped += queue.count
        queue.removeAll()
        delegate?.managedConnection(self, didFail: error)
    }

    fileprivate func opened(_ info: WebSocketOpenInfo) {
        delegate?.managedConnectionDidOpen(self, info: OpenInfo(subprotocol: info.subprotocol, headers: info.headers, reconnects: 0))
        let pending = queue
        queue.removeAll()
        for (data, kind) in pending where socket.state == .open {
            try? socket.send(data, kind: kind)
        }
    }

    fileprivate func received(_ message: ByteBuffer, kind: WebSocketMessageKind) {
        delegate?.managedConnection(self, didReceive: message, kind: kind)
    }

    fileprivate func failed(_ error: WebSocketConnectionError) {
        if socket.state == .closed || socket.state == .idle {
            // A dial that never opened: without reconnection that is the end.
            finish(error: error.description)
        } else {
            delegate?.managedConnection(self, didFail: error.description)
        }
    }

    fileprivate func closed(_ info: WebSocketCloseInfo) {
        closedForGood = true
        dropped += queue.count
        queue.removeAll()
        delegate?.managedConnection(
            self, didClose: CloseInfo(code: info.code, reason: info.reason, clean: info.clean, by: info.initiator, willReconnect: false)
        )
    }
}

/// The socket's delegate; a separate object because the socket holds it weakly
/// and `ManagedConnection` should not expose the delegate methods.
private final class Events: WebSocketConnectionDelegate {
    weak var owner: ManagedConnection?

    func connectionDidOpen(_ connection: WebSocketConnection, info: WebSocketOpenInfo) { owner?.opened(info) }
    func connection(_ connection: WebSocketConnection, didReceive message: ByteBuffer, kind: WebSocketMessageKind) {
        owner?.received(message, kind: kind)
    }
    func connection(_ connection: WebSocketConnection, didFail error: WebSocketConnectionError) { owner?.failed(error) }
    func connection(_ connection: WebSocketConnection, didClose info: WebSocketCloseInfo) { owner?.closed(info) }
}
