import NIOCore
import NIOHTTP1

/// One client connected to a ``MessageServer``: the `peer` of `on_connect`, with what a
/// mock server needs to play a real one, or a broken one.
///
/// All methods must be called on the server's loop.
///
/// ```swift
/// try peer.send(ByteBuffer(string: "welcome"), kind: .text)
/// peer.pause(for: .seconds(3))              // stop reading and answering pings
/// peer.sendRaw(ByteBuffer(bytes: [0x81, 0x7E]))   // a frame header promising bytes that never come
/// peer.abort()                              // RST, no close frame
/// ```
public final class ServerPeer {
    /// Increasing from 1 in the order peers connected to their server.
    public let id: Int
    /// `ip:port` of the client.
    public let remoteAddress: String
    /// The handshake request's path (until the peer closes), subprotocol and address (only
    /// the address for TCP). Its headers are empty: they go to the delegate's `didConnect`
    /// and are not kept, so an open peer, or a closed one still referenced (by a Lua
    /// script until its collector runs), does not hold them.
    public private(set) var request: ServerPeerRequest
    /// Message and byte counters.
    public private(set) var stats = ConnectionStats()
    /// True while the peer is stopped by ``pause(for:)``.
    public private(set) var isPaused = false
    /// The channel, for diagnostics and tests.
    public let channel: Channel
    /// The outbound budget: what the socket cannot take yet waits here, bounded.
    public let outbound: OutboundBuffer
    /// The peer's probes answered by the server's ``MessageServerOptions/autoReply`` or
    /// ``answerProbe(_:kind:)``.
    public var autoReplies: Int { self.core.autoReplies }
    /// The send budget, the heartbeat and the server's `auto_reply` (kept here: the message
    /// path does not go through the server's options for it): what a client has too.
    private let core: SessionCore
    /// The core's heartbeat, held here too (as ``outbound``): read per message, a stored
    /// reference costs no retain of the core.
    private let heartbeat: HeartbeatDriver

    typealias Link = ChannelLink<ServerPeer>

    private(set) var link: Link?
    /// Held strongly (a message reaches the server without a weak load) until the close is
    /// reported: the server holds its peers until then, and a closed peer that a script
    /// still holds keeps nothing of its server.
    private var server: MessageServer?
    /// Announced to the delegate (TCP up, TLS and the WebSocket handshake done).
    private(set) var isConnected = false
    private(set) var isClosed = false
    private var resumeTimer: ClockTask?
    /// Closed for being too slow (`slow_peer = "close"`): what the close reports when no
    /// close frame came back (the peer does not read, so it rarely does).
    private var slowClose: (code: UInt16, reason: String)?

    init(id: Int, channel: Channel, request: ServerPeerRequest, server: MessageServer) {
        self.id = id
        self.channel = channel
        self.remoteAddress = request.remoteAddress
        self.request = request
        self.server = server
        let options = server.options
        self.core = SessionCore(
            limit: options.queueLimit, bytes: options.queueBytes, overflow: options.overflow, pool: server.sendBudget,
            heartbeat: options.heartbeat, autoReply: options.autoReply, eventLoop: channel.eventLoop
        )
        self.outbound = self.core.outbound
        self.heartbeat = self.core.heartbeat
        self.core.own(self)
    }

    /// Creates the WebSocket handler; the caller adds it to the pipeline.
    func makeWebSocketLink(maxMessage: Int, deflate: PerMessageDeflate?, closeTimeout: TimeAmount) -> WebSocketHandler<ServerPeer> {
        let handler = WebSocketHandler(role: .server, owner: self, maxMessage: maxMessage, deflate: deflate, closeTimeout: closeTimeout)
        self.link = .webSocket(handler)
        return handler
    }

    /// Creates the TCP handler; the caller adds it to the pipeline.
    func makeTCPLink(framing: TCPFraming, closeTimeout: TimeAmount) -> FramedChannelHandler {
        let handler = FramedChannelHandler(framing: framing, closeTimeout: closeTimeout, owner: self)
        self.link = .tcp(handler)
        return handler
    }

    /// True while messages can be sent.
    public var isOpen: Bool {
        guard self.isConnected, !self.isClosed else { return false }
        return self.link?.isOpen ?? false
    }

    // MARK: Talking

    /// Sends a message (TCP: framed by the server's framing; `kind` is ignored) now, or
    /// queues it within the peer's budget while the socket cannot take more. Throws when
    /// the peer is not open (or its transport cannot carry the message).
    @discardableResult
    public func send(_ data: ByteBuffer, kind: MessageKind = .text) throws(UsageError) -> OutboundBuffer.Offer {
        try self.sendIfOpen { self.offer(OutboundMessage(data, kind: kind)) }
    }

    /// ``send(_:kind:)`` for bytes valid only for the call (a Lua string's): written straight
    /// from them when the socket can take the message now, copied only when it must wait
    /// (the one way a client connection's sends go too). `.closed` when the peer is not
    /// open, or its transport cannot carry the message (``lastRefusal`` says why).
    public func send(bytes: UnsafeRawBufferPointer, kind: MessageKind) -> SendResult {
        guard self.isOpen else { return .closed }
        let offer = self.outbound.offer(bytes: bytes, kind: kind)
        if offer == .sent { self.outboundWrote(messages: 1, payloadBytes: bytes.count) }
        return SendResult(offer)
    }

    private func sendIfOpen(_ offer: () -> OutboundBuffer.Offer) throws(UsageError) -> OutboundBuffer.Offer {
        guard self.isOpen else { throw .peerNotConnected }
        let offer = offer()
        if offer == .unsendable { throw .unsendable }
        return offer
    }

    /// Offers a message already encoded for this kind of server (a broadcast's buffer).
    func offerEncoded(_ frame: ByteBuffer, kind: MessageKind, payloadSize: Int) -> OutboundBuffer.Offer {
        self.offer(OutboundMessage(frame: frame, kind: kind, payloadSize: payloadSize))
    }

    /// Hands a message to the peer's budget, counting it when it was written at once.
    func offer(_ message: OutboundMessage) -> OutboundBuffer.Offer {
        let offer = self.outbound.offer(message)
        if offer == .sent { self.outboundWrote(messages: message.count, payloadBytes: message.payloadSize) }
        return offer
    }

    /// Messages waiting in the peer's queue.
    public var queued: Int { self.outbound.queued }
    /// Bytes waiting: the queue plus what the socket has not taken.
    public var buffered: Int { self.outbound.buffered }
    /// Messages dropped: overflow, broadcasts it could not take, the queue a close threw away.
    public var dropped: Int { self.outbound.dropped }

    /// The compression state, when this WebSocket peer negotiated it (its frames cannot be
    /// shared with other peers).
    var deflate: PerMessageDeflate? { self.link?.deflate }

    /// Answers the peer's probe (`auto_reply`), counted in ``autoReplies``: at once, ahead
    /// of the queue, within the peer's byte budget (skipped when it does not fit), as a
    /// client's are. Nothing when the peer is not open.
    public func answerProbe(_ reply: ByteBuffer, kind: MessageKind) {
        guard self.isOpen else { return }
        self.core.answerProbe(reply, kind: kind)
    }

    /// Sends a WebSocket ping; false for TCP (no ping) or when the peer is not open.
    @discardableResult
    public func ping(_ payload: ByteBuffer = ByteBuffer()) -> Bool {
        guard let link = self.link, self.isOpen else { return false }
        return (try? link.ping(payload)) != nil
    }

    /// False for TCP: there is no ping.
    public var supportsPing: Bool {
        if case .tcp? = self.link { return false }
        return true
    }

    /// Closes the connection in order: a WebSocket close handshake (`code` 1000, 1001,
    /// 3000–4999, ...), or for TCP FIN after pending writes (the code is only reported).
    /// What the peer's queue held is dropped (counted, and returned); what the socket took
    /// goes out first.
    @discardableResult
    public func close(code: UInt16 = CloseCode.normal, reason: String = "") throws(UsageError) -> Int {
        let frame = try self.link?.closeFrame(code: code, reason: reason)
        let dropped = self.outbound.dropQueue()
        if let link = self.link {
            link.close(frame, code: code, reason: reason)
        } else {
            self.channel.close(promise: nil)
        }
        return dropped
    }

    public var sessionStats: SessionStats {
        self.core.stats(self.stats)
    }

    public var isOverBudget: Bool { self.outbound.budgetReached }
    public var refusedByProcessBudget: Bool { self.outbound.refusedByPool }
    public var lastRefusal: String? { self.outbound.lastRefusal }

    // MARK: Fault injection

    /// Drops the connection the way a crashed host does: no close frame, and RST instead of
    /// FIN (SO_LINGER 0). Reported as 1006.
    public func abort() {
        self.drop(reset: true, reason: "aborted")
    }

    /// Stops reading from the peer for `duration`: its messages and pings wait in the
    /// kernel, unanswered, as with a stalled process; then everything resumes. The server
    /// heartbeat does not count the pause against the peer. Pausing again restarts the clock.
    public func pause(for duration: TimeAmount) {
        guard !self.isClosed else { return }
        self.isPaused = true
        self.setAutoRead(false)
        self.heartbeat.stop()
        self.resumeTimer?.cancel()
        // Holds the peer until it fires or is cancelled (at the latest by the close).
        self.resumeTimer = RuntimeClock.of(self.channel.eventLoop).scheduleTask(on: self.channel.eventLoop, in: duration) {
            self.resume()
        }
    }

    /// Ends a pause early.
    public func resume() {
        guard self.isPaused else { return }
        self.isPaused = false
        self.resumeTimer?.cancel()
        self.resumeTimer = nil
        self.setAutoRead(true)
        if self.isConnected && !self.isClosed { self.heartbeat.start() }
    }

    /// Writes `bytes` as they are, around the framing and the WebSocket codec: hand-made
    /// frames, invalid UTF-8, lengths that lie.
    public func sendRaw(_ bytes: ByteBuffer) {
        guard !self.isClosed else { return }
        self.channel.writeAndFlush(bytes, promise: nil)
    }

    private func setAutoRead(_ on: Bool) {
        try? self.channel.syncOptions?.setOption(.autoRead, value: on)
    }

    private func drop(reset: Bool, reason: String) {
        if let link = self.link {
            link.abort(reset: reset, reason: reason)
        } else {
            self.channel.close(promise: nil)
        }
    }

    // MARK: Life

    /// The peer is ready: start watching it and tell the server, handing it the request's
    /// headers, which the peer does not keep.
    func connected(subprotocol: String? = nil, headers: HTTPHeaders = [:]) {
        guard !self.isConnected, !self.isClosed else { return }
        self.isConnected = true
        self.request.subprotocol = subprotocol
        if let outbound = self.link?.outbound { self.outbound.attach(self.channel, link: outbound) }
        self.heartbeat.start()
        var request = self.request
        request.headers = headers
        self.server?.peerConnected(self, request: request)
    }

    /// A whole message from the peer (either transport).
    func handlerReceived(_ message: ByteBuffer, kind: MessageKind) {
        self.stats.countReceived(bytes: message.readableBytes)
        self.heartbeat.didReceiveMessage()
        if let (reply, replyKind) = self.core.autoReply?.answer(to: message, kind: kind) {
            self.answerProbe(reply, kind: replyKind)
            return
        }
        self.server?.peer(self, didReceive: message, kind: kind)
    }

    /// The peer broke the protocol or the framing; the close report follows.
    func handlerFailed(_ error: ConnectionError) {
        self.server?.peer(self, didFail: error)
    }

    /// `slow_peer = "close"`: closes with 1008 "too slow", and reports that code and reason
    /// even when the peer, not reading, never answers the close frame.
    func closeForBeingSlow() {
        guard self.isOpen else { return }
        self.slowClose = (CloseCode.policyViolation, "too slow")
        _ = try? self.close(code: CloseCode.policyViolation, reason: "too slow")
    }

    /// The connection ended; called exactly once.
    func handlerClosed(_ info: CloseInfo) {
        guard !self.isClosed else { return }
        var info = info
        if let slow = self.slowClose, info.code == CloseCode.abnormal || info.code == CloseCode.noStatus {
            info.code = slow.code
            info.reason = slow.reason
        }
        self.isClosed = true
        // The path may be up to the header bound (80 KiB) long.
        self.request.path = ""
        self.outbound.dropQueue()
        self.outbound.detach()
        self.heartbeat.stop()
        self.resumeTimer?.cancel()
        self.resumeTimer = nil
        self.server?.peer(self, didClose: info, wasConnected: self.isConnected)
        // Nothing is reported after the close: the links to the server and from the budget
        // and the heartbeat go, and with them every cycle through the peer.
        self.server = nil
        self.core.disown()
    }
}

extension ServerPeer: MessageSession {}

extension ServerPeer: HeartbeatOwner {
    func heartbeatSendPing(_ payload: ByteBuffer) {
        // A TCP peer has no ping: its silence alone decides.
        self.ping(payload)
    }

    func heartbeatPeerIsDead() {
        self.drop(reset: false, reason: "heartbeat timeout")
    }
}

/// The outbound budget's events; what it writes goes straight to the peer's handler.
extension ServerPeer: OutboundWriter {
    func outboundWrote(messages: Int, payloadBytes: Int) {
        self.stats.countSent(bytes: payloadBytes, messages: messages)
        self.heartbeat.didSend()
    }

    var outboundTransportIsOpen: Bool { self.isOpen }

    func outboundDrained() {
        self.server?.peerDrained(self)
    }

    func outboundFirstReachedBudget() {
        self.server?.peerReachedBudget(self)
    }
}

extension ServerPeer: ChannelOwner {
    static func budgetLink(_ handler: WebSocketHandler<ServerPeer>) -> OutboundLink? { .serverWebSocket(handler) }

    func handlerReceivedPing() {
        self.heartbeat.didReceivePing()
    }

    func handlerReceivedPong(_ payload: ByteBuffer) {
        self.heartbeat.didReceivePong(payload)
    }

    func handlerBecameActive() {
        self.server?.peerBecameActive(self)
    }
}
