import Logging
import NIOCore
import NIOHTTP1

/// What the script sees of a connection's life, reported by `ManagedConnection`.
/// Every method is called on the connection's event loop.
public protocol ManagedConnectionDelegate: AnyObject {
    /// Opened (first time or after a reconnect). Queued messages are flushed right
    /// after this returns, so what the delegate sends here goes first.
    func managedConnectionDidOpen(_ connection: ManagedConnection, info: ManagedConnection.OpenInfo)
    func managedConnection(_ connection: ManagedConnection, didReceive message: ByteBuffer, kind: MessageKind)
    func managedConnection(_ connection: ManagedConnection, didFail error: ConnectionError)
    func managedConnection(_ connection: ManagedConnection, didClose report: ConnectionLifecycle.CloseReport)
    /// A WebSocket pong arrived (answering a heartbeat's ping or one sent with `ping`).
    func managedConnection(_ connection: ManagedConnection, didReceivePong payload: ByteBuffer)
    /// Before retry `attempt` after `delay`: the script's `on_reconnect` may stop it or change it.
    func managedConnection(_ connection: ManagedConnection, willReconnect attempt: Int, delay: TimeAmount) -> ManagedConnection.RetryDecision
    /// An application-level heartbeat is due: the message to send, and its kind.
    func managedConnectionHeartbeatMessage(_ connection: ManagedConnection) -> (ByteBuffer, MessageKind)?
    /// With a heartbeat `reply`: does this message answer the heartbeat? A reply is
    /// consumed: it is not passed on to ``managedConnection(_:didReceive:kind:)``.
    func managedConnection(_ connection: ManagedConnection, isHeartbeatReply message: ByteBuffer, kind: MessageKind) -> Bool
    /// `buffered` fell back under half the byte budget after the budget was reached (`on_drain`).
    func managedConnectionDidDrain(_ connection: ManagedConnection)
    /// The outbound budget turned a message away for the first time on this connection.
    func managedConnectionReachedBudget(_ connection: ManagedConnection)
}

extension ManagedConnectionDelegate {
    public func managedConnection(_ connection: ManagedConnection, willReconnect attempt: Int, delay: TimeAmount) -> ManagedConnection.RetryDecision {
        ManagedConnection.RetryDecision()
    }
    public func managedConnectionHeartbeatMessage(_ connection: ManagedConnection) -> (ByteBuffer, MessageKind)? { nil }
    public func managedConnection(_ connection: ManagedConnection, isHeartbeatReply message: ByteBuffer, kind: MessageKind) -> Bool {
        false
    }
    public func managedConnection(_ connection: ManagedConnection, didReceivePong payload: ByteBuffer) {}
    public func managedConnectionDidDrain(_ connection: ManagedConnection) {}
    public func managedConnectionReachedBudget(_ connection: ManagedConnection) {}
}

/// A long-lived client connection as the scripting API presents it: a
/// WebSocket or TCP transport driven by `ConnectionLifecycle` (reconnect with
/// backoff), `HeartbeatMonitor` and an `OutboundBuffer`: the bounded send queue for
/// what is sent while it is not open or while the peer reads slowly. This type only
/// performs the actions those state machines decide.
///
/// All methods must be called on `eventLoop`.
///
/// ```swift
/// var config = ManagedConnection.Configuration()
/// config.reconnect = ReconnectPolicy(attempts: nil)
/// let c = ManagedConnection(url: try TransportURL("ws://127.0.0.1:9000/"), configuration: config, eventLoop: loop)
/// c.delegate = bot
/// c.start()
/// _ = c.send(ByteBuffer(string: "hello"), kind: .text)   // queued until open
/// ```
public final class ManagedConnection {
    public struct Configuration {
        /// For `ws://` and `wss://`: headers, subprotocols, compression, timeouts, TLS.
        public var socket = WebSocketClientOptions()
        /// For `tcp://` and `tls://`: framing, timeouts, TLS.
        public var tcp = TCPClientOptions()
        /// The outbound budget (`queue.limit`, `queue.bytes`, `queue.overflow`).
        public var queueLimit = 1024
        public var queueBytes = 16 << 20
        public var overflow = SendQueue<OutboundMessage>.Overflow.error
        /// The process-wide budget (of this loop) the connection's budget charges, if any.
        public var sendBudget: SendBudgetPool?
        public var reconnect: ReconnectPolicy? = ReconnectPolicy()
        public var heartbeat: HeartbeatMonitor.Configuration? = HeartbeatMonitor.Configuration()
        /// `ready = "manual"`: after each open, what is sent or queued stays queued until
        /// ``ready()`` (the application's own handshake, sent with ``sendNow(_:kind:)``).
        public var manualReady = false
        /// `auto_reply`: the peer's pings answered without reaching the delegate.
        public var autoReply: AutoReply?
        /// WebSocket only: the bytes of the messages that arrive are one stream, cut into
        /// messages by this framing (a protocol such as MQTT over WebSocket, which may put
        /// several packets in one WebSocket message and one packet across several). Each
        /// message sent is still one WebSocket message, as it is given.
        public var messageFraming: TCPFraming?

        public init() {}
    }

    public struct OpenInfo {
        public var subprotocol: String?
        public var headers: HTTPHeaders
        public var reconnects: Int
        /// How long this dial's steps took (DNS, TCP, TLS, the WebSocket upgrade).
        public var timing: ConnectTiming?
    }

    /// What `on_reconnect` answered.
    public struct RetryDecision {
        public var answer: ConnectionLifecycle.ReconnectAnswer
        public var url: TransportURL?
        /// WebSocket handshake headers for the next attempts.
        public var headers: [(String, String)]?

        public init(answer: ConnectionLifecycle.ReconnectAnswer = .proceed, url: TransportURL? = nil, headers: [(String, String)]? = nil) {
            self.answer = answer
            self.url = url
            self.headers = headers
        }
    }

    public typealias SendResult = MoonwireCore.SendResult

    public typealias Stats = SessionStats

    public let eventLoop: EventLoop
    /// Receives the connection's events; held strongly, so that a message reaches it without
    /// a weak load. Whoever sets it cuts the link once it wants no more events (the Lua
    /// runtime does when the connection has ended for good, and when the script ends).
    public var delegate: ManagedConnectionDelegate?
    /// Writes every event to a recording (`--record`, docs/recording.md) when set.
    public var recorder: ConnectionRecorder?
    /// Where the connection's events (debug), messages (trace) and reconnect attempts
    /// (info) are logged; nil logs nothing. See ``ConnectionLog``.
    public var logger: Logger? {
        didSet { tracing = logger.map { $0.logLevel <= .trace } ?? false }
    }
    /// Messages are logged (trace): known without copying the logger per message.
    private var tracing = false
    /// The URL dialled, as logged.
    private var urlText: String
    /// Why the open transport refused the last message `send` answered `.closed` for
    /// (a TCP framing cannot carry it), or nil.
    public var lastRefusal: String? { outbound.lastRefusal }
    private let manualReady: Bool
    /// With `manualReady`: whether ``ready()`` released the queue since the last dial.
    public private(set) var released = false
    /// Sends wait in the queue: manual ready, not yet released.
    private var holding: Bool { manualReady && !released }
    /// The last failure, named by the reconnect log line.
    private var lastError: String?
    public let queueLimit: Int
    /// The client connection that dials and carries the messages: the transport (not
    /// private: the tests look at its lifetime).
    let transport: ClientConnection
    private var lifecycle: ConnectionLifecycle
    /// The send budget, the heartbeat and `auto_reply`: what a server's peer has too.
    private let core: SessionCore
    /// The core's two parts held here too: read per message, a stored reference costs no
    /// retain of the core (and OutboundBuffer, weakly referenced by the channel, takes
    /// Swift's slow reference-count path for every retain).
    private let heartbeat: HeartbeatDriver
    private let outbound: OutboundBuffer
    /// Between the open and the end of the `on_open` handlers: sends go straight out,
    /// ahead of what was queued.
    private var openingHandlers = false
    private var openInfo: ConnectionOpenInfo?
    private var retryTimer: ClockTask?
    /// After `abortDial`, the abandoned dial's last events are not the lifecycle's business.
    private var ignoringTransport = false
    private var droppedByLastClose = 0
    /// Where the next dial goes, when `on_reconnect` changed it.
    private var nextURL: TransportURL?
    /// ``Configuration/messageFraming``, and the stream it cuts since the last open.
    private let messageFraming: TCPFraming?
    /// `messageFraming != nil`.
    private let reframes: Bool
    private var reframer: MessageReader?
    /// What ``reframer`` may hold without a complete message (`max_message`).
    private let maxMessage: Int

    public init(url: TransportURL, configuration: Configuration, eventLoop: EventLoop) {
        self.eventLoop = eventLoop
        urlText = url.description
        manualReady = configuration.manualReady
        messageFraming = configuration.messageFraming
        reframes = configuration.messageFraming != nil
        maxMessage = configuration.socket.maxMessage
        queueLimit = configuration.queueLimit
        transport = ClientConnection(url: url, webSocket: configuration.socket, tcp: configuration.tcp, eventLoop: eventLoop)
        lifecycle = ConnectionLifecycle(reconnect: configuration.reconnect)
        core = SessionCore(
            limit: configuration.queueLimit, bytes: configuration.queueBytes, overflow: configuration.overflow, pool: configuration.sendBudget,
            heartbeat: configuration.heartbeat, autoReply: configuration.autoReply, eventLoop: eventLoop
        )
        heartbeat = core.heartbeat
        outbound = core.outbound
        // Alive from here until closed for good (see drive(_:)): `close()` ends a connection
        // never started.
        link()
    }

    /// "connecting" | "open" | "closing" | "closed" | "reconnecting"
    public var state: String { lifecycle.state.rawValue }

    /// Alive: open, or on its way to be (keeps `moonwire run` going).
    public var isAlive: Bool { lifecycle.isAlive }

    public var url: TransportURL { transport.url }

    public var stats: Stats {
        var stats = core.stats(transport.stats)
        stats.reconnects = lifecycle.reconnects
        stats.connectTiming = openInfo?.timing
        return stats
    }

    public var sessionStats: SessionStats { stats }

    /// Open: messages flow.
    public var isOpen: Bool { lifecycle.state == .open }

    public func start() {
        drive(lifecycle.start())
    }

    /// Sends now if the socket can take it; else queues within the budget (also while the
    /// transport is down, or on its way down after a protocol violation: a reconnect may
    /// follow).
    public func send(_ data: ByteBuffer, kind: MessageKind) -> SendResult {
        guard lifecycle.sendRoute != .refuse else { return .closed }
        return offer(data, kind: kind, direct: openingHandlers && !holding)
    }

    /// ``send(_:kind:)`` from bytes valid only for the call (a Lua string's): framed
    /// straight from them when the socket can take the message now, so the payload is
    /// copied once, into the frame.
    public func send(bytes: UnsafeRawBufferPointer, kind: MessageKind) -> SendResult {
        guard lifecycle.sendRoute != .refuse else { return .closed }
        return offer(bytes: bytes, kind: kind, direct: openingHandlers && !holding)
    }

    /// ``sendNow(_:kind:)`` from bytes valid only for the call.
    public func sendNow(bytes: UnsafeRawBufferPointer, kind: MessageKind) -> SendResult {
        guard lifecycle.sendRoute == .send else { return .closed }
        return offer(bytes: bytes, kind: kind, direct: true)
    }

    private func offer(bytes: UnsafeRawBufferPointer, kind: MessageKind, direct: Bool) -> SendResult {
        // Recording and trace logging keep the message: they take the buffered path.
        if recorder != nil || tracing {
            return offer(ByteBuffer(bytes: bytes), kind: kind, direct: direct)
        }
        let offer = outbound.offer(bytes: bytes, kind: kind, direct: direct)
        if offer == .sent { outboundWrote(messages: 1, payloadBytes: bytes.count) }
        return SendResult(offer)
    }

    /// Hands a message to the outbound budget: written now, queued, or refused.
    private func offer(_ data: ByteBuffer, kind: MessageKind, direct: Bool) -> SendResult {
        let offer = outbound.offer(OutboundMessage(data, kind: kind), direct: direct)
        switch offer {
        case .sent:
            outboundWrote(messages: 1, payloadBytes: data.readableBytes)
            recorder?.message(data, kind: kind, outgoing: true)
            if tracing, let logger { logger.trace("\(ConnectionLog.message(.outbound, kind: kind, data))") }
        case .queued, .dropped:
            // Logged and recorded as it is taken (the flush sends it without another line).
            recorder?.message(data, kind: kind, outgoing: true)
            if tracing, let logger { logger.trace("\(ConnectionLog.message(.outbound, kind: kind, data)) (queued)") }
        case .full, .tooLarge, .unsendable:
            break
        }
        return SendResult(offer)
    }

    /// The byte budget (`queue.bytes`).
    public var queueBytes: Int { outbound.queue.byteLimit }

    /// The last send turned away (`.queueFull`, `.tooLarge`, or dropped) was turned away by
    /// the process-wide budget, not by the connection's own.
    public var refusedByProcessBudget: Bool { outbound.refusedByPool }

    /// True from the moment the budget turned a message away until `buffered` fell back
    /// under half of it: what `c:drain()` waits for.
    public var isOverBudget: Bool { outbound.budgetReached }

    /// Stops reading from the socket (the script has not taken what arrived), or reads
    /// again. Holds across reconnects.
    public var readingPaused = false {
        didSet {
            guard readingPaused != oldValue, let channel = transport.currentChannel else { return }
            try? channel.syncOptions?.setOption(.autoRead, value: !readingPaused)
        }
    }

    /// `c:send_now`: past the queue while it is held for `ready = "manual"` (the
    /// application's handshake); like ``send(_:kind:)`` otherwise, but never queued.
    public func sendNow(_ data: ByteBuffer, kind: MessageKind) -> SendResult {
        guard lifecycle.sendRoute == .send else { return .closed }
        return offer(data, kind: kind, direct: true)
    }

    /// `c:ready()`: the application's handshake is done; what waited goes out, in
    /// order, and later sends go straight out. False unless open and held.
    @discardableResult
    public func ready() -> Bool {
        guard holding, lifecycle.sendRoute == .send else { return false }
        released = true
        if tracing, let logger { logger.trace("ready: releasing \(outbound.queued) held messages (\(urlText))") }
        // Also inside the open event (an on_open handler, or a coroutine that wait_open
        // resumed there): what waited goes now, before anything sent after ready().
        openingHandlers = false
        outbound.isHeld = false
        return true
    }

    /// Answers a peer's probe (`auto_reply`): goes out at once, past a queue held for
    /// ``ready()``, counted in ``Stats/autoReplies``. Like the probe, not recorded: both
    /// come at the peer's pace, which a replay cannot keep. Nothing when not open.
    public func answerProbe(_ reply: ByteBuffer, kind: MessageKind) {
        guard lifecycle.sendRoute == .send, transport.state == .open else { return }
        if tracing, let logger { logger.trace("\(ConnectionLog.message(.outbound, kind: kind, reply)) (auto reply)") }
        core.answerProbe(reply, kind: kind)
    }

    /// False for TCP: there is no ping, a heartbeat needs a message.
    public var supportsPing: Bool { transport.supportsPing }

    public func ping(_ payload: ByteBuffer) -> Bool {
        guard lifecycle.state == .open, transport.supportsPing, (try? transport.ping(payload)) != nil else { return false }
        if tracing, let logger { logger.trace("\(ConnectionLog.control(.outbound, "ping", payload))") }
        recorder?.control("ping", payload: payload, outgoing: true)
        heartbeat.didSend()
        return true
    }

    /// A deliberate close: no reconnect afterwards. Returns how many queued messages it dropped.
    @discardableResult
    public func close(code: UInt16, reason: String) -> Int {
        droppedByLastClose = 0
        drive(lifecycle.closeRequested(code: code, reason: reason))
        return droppedByLastClose
    }

    /// `c:reconnect()`: reconnect now (also revives a closed connection).
    public func reconnectNow() {
        drive(lifecycle.reconnectRequested())
    }

    /// `c:reconnect(opts | false)`.
    public func setReconnect(_ policy: ReconnectPolicy?) {
        drive(lifecycle.reconnectPolicyChanged(policy))
    }

    /// `c:heartbeat(opts | false)`.
    public func setHeartbeat(_ configuration: HeartbeatMonitor.Configuration?) {
        heartbeat.reconfigure(configuration)
    }

    // MARK: Performing the lifecycle's actions

    /// Performs a list, then whatever had to wait until the script's handlers ran.
    ///
    /// While the connection is alive its parts hold it strongly (the client connection as
    /// its delegate, the budget as its writer, the heartbeat as its owner): no weak load on
    /// the message path. Once it has ended for good the links are cut, so nothing calls
    /// back into it and nothing keeps it alive but its user; `start()` or a reconnect makes
    /// them again.
    private func drive(_ actions: [ConnectionLifecycle.Action]) {
        link()
        var list = actions
        while !list.isEmpty {
            for action in list { perform(action) }
            list = lifecycle.afterHandlers()
        }
        if !lifecycle.isAlive { unlink() }
    }

    /// Whether the parts hold the connection (see ``drive(_:)``).
    private var linked = false

    private func link() {
        guard !linked else { return }
        linked = true
        transport.delegate = self
        core.own(self)
    }

    private func unlink() {
        guard linked else { return }
        linked = false
        transport.delegate = nil
        core.disown()
    }

    private func perform(_ action: ConnectionLifecycle.Action) {
        switch action {
        case .dial:
            released = false
            logger?.debug("connecting to \((nextURL?.description ?? urlText))")
            ignoringTransport = false
            do {
                try transport.connect(to: nextURL)
                nextURL = nil
            } catch {
                drive(lifecycle.failed(ConnectionError(step: .connect, message: error.description)))
            }
        case .abortDial:
            ignoringTransport = true
            transport.abort()
        case .startHeartbeat:
            heartbeat.start()
        case .stopHeartbeat:
            heartbeat.stop()
        case .notifyOpen(let reconnects):
            logger?.debug("open: \(urlText)\(openInfo?.subprotocol.map { " (protocol \($0))" } ?? "")")
            let info = OpenInfo(
                subprotocol: openInfo?.subprotocol, headers: openInfo?.headers ?? [:], reconnects: reconnects, timing: openInfo?.timing
            )
            // The response's headers were for the open event only: an idle connection
            // should not carry them (about 1 KiB per connection).
            openInfo?.headers = HTTPHeaders()
            delegate?.managedConnectionDidOpen(self, info: info)
        case .flushQueue:
            // The on_open handlers ran: what was queued goes now, after what they sent;
            // with `ready = "manual"` it waits for ready().
            openingHandlers = false
            outbound.isHeld = holding
        case .dropQueue:
            let held = holding
            let dropped = outbound.dropQueue()
            droppedByLastClose += dropped
            if held && dropped > 0 {
                logger?.warning("connection to \(urlText) closed with \(dropped) message\(dropped == 1 ? "" : "s") held for c:ready() (ready = \"manual\"), never sent: dropped")
            }
        case .sendClose(let code, let reason):
            try? transport.close(code: code, reason: reason)
        case .dropConnection:
            transport.abort()
        case .reportError(let error):
            lastError = error.description
            logger?.debug("error: \(error.description)")
            recorder?.failed(error.description)
            delegate?.managedConnection(self, didFail: error)
        case .reportClose(let report):
            logger?.debug("closed: \(report.code)\(report.reason.isEmpty ? "" : " \(report.reason)") by \(report.by.rawValue)\(report.willReconnect ? ", will reconnect" : "")")
            recorder?.closed(code: report.code, reason: report.reason, by: report.by.rawValue, clean: report.clean, willReconnect: report.willReconnect)
            // The first retry line says why the connection went; later ones, why a dial failed.
            if report.willReconnect { lastError = ConnectionLog.loss(report) }
            delegate?.managedConnection(self, didClose: report)
        case .askReconnectHook(let attempt, let delay):
            recorder?.reconnecting(attempt: attempt, delay: Double(delay.nanoseconds) / 1e9)
            let decision = delegate?.managedConnection(self, willReconnect: attempt, delay: delay) ?? RetryDecision()
            if case .stop = decision.answer {
                logger?.info("not retrying \(urlText): on_reconnect said no")
            } else {
                var wait = delay
                if case .delay(let d) = decision.answer { wait = d }
                let attempts = lifecycle.reconnectPolicy.flatMap { $0.attempts }
                logger?.info("\(ConnectionLog.retry(delay: wait, attempt: attempt, of: attempts, after: lastError)) (\(nextURL?.description ?? urlText))")
            }
            if let url = decision.url { nextURL = url }
            if let headers = decision.headers { transport.setHandshakeHeaders(headers) }
            drive(lifecycle.reconnectHookAnswered(decision.answer))
        case .startRetryTimer(let delay):
            retryTimer?.cancel()
            // Holds the connection until it fires or is cancelled (every close cancels it).
            retryTimer = RuntimeClock.of(eventLoop).scheduleTask(on: eventLoop, in: delay) {
                self.retryTimer = nil
                self.drive(self.lifecycle.retryTimerFired())
            }
        case .cancelRetryTimer:
            retryTimer?.cancel()
            retryTimer = nil
        }
    }
}

extension ManagedConnection: MessageSession {}

extension ManagedConnection: HeartbeatOwner {
    func heartbeatSendPing(_ payload: ByteBuffer) {
        if tracing, let logger { logger.trace("\(ConnectionLog.control(.outbound, "ping", payload, note: "heartbeat"))") }
        try? transport.ping(payload)
    }

    /// Through the outbound budget, as every message is: counted, and charged to the
    /// process-wide budget.
    func heartbeatSendMessage() {
        guard lifecycle.sendRoute == .send, let (message, kind) = delegate?.managedConnectionHeartbeatMessage(self) else { return }
        if tracing, let logger { logger.trace("\(ConnectionLog.message(.outbound, kind: kind, message)) (heartbeat)") }
        guard transport.state == .open else { return }
        core.writeAhead(message, kind: kind)
    }

    func heartbeatPeerIsDead() {
        drive(lifecycle.heartbeatFailed())
    }
}

/// The events of the client connection: ``ManagedConnection`` is its delegate.
extension ManagedConnection: ClientConnectionDelegate {
    public func connectionDidOpen(_ connection: ClientConnection, info: ConnectionOpenInfo) {
        guard !ignoringTransport else { return }
        openInfo = info
        // Each connection is a new stream: nothing left over from the last one.
        reframer = messageFraming.map { MessageReader($0.makeDecoder()) }
        recorder?.opened(subprotocol: info.subprotocol, extensions: info.headers.first(name: "sec-websocket-extensions"), reconnects: lifecycle.reconnects)
        if let channel = transport.currentChannel, let link = transport.outboundLink {
            // What waited for the open goes after what on_open sends: held until the
            // handlers ran, while their sends go straight out. With nothing waiting,
            // nothing is held and the budget applies as usual; `ready = "manual"` holds
            // the queue until ready().
            openingHandlers = !outbound.queue.isEmpty
            outbound.isHeld = openingHandlers || holding
            outbound.attach(channel, link: link)
            if readingPaused { try? channel.syncOptions?.setOption(.autoRead, value: false) }
        }
        drive(lifecycle.opened())
    }

    public func session(_ connection: ClientConnection, didReceive message: ByteBuffer, kind: MessageKind) {
        if tracing, let logger { logger.trace("\(ConnectionLog.message(.inbound, kind: kind, message))") }
        // A constant Bool first: asking the optional copied (and destroyed) the reader, or
        // the framing, per message.
        guard reframes, reframer != nil else { return received(message, kind: kind) }
        reframer!.append(message)
        do throws(TCPFramingError) {
            while let framed = try reframer?.next() {
                received(framed, kind: kind)
                // A handler may have closed the connection: the rest is not wanted.
                guard lifecycle.state == .open else { return }
            }
            if let waiting = reframer?.bufferedBytes, waiting > maxMessage {
                throw TCPFramingError.tooBig("\(waiting) bytes received without a complete message", max: maxMessage)
            }
        } catch {
            reframer = nil
            drive(lifecycle.failed(error.connectionError))
            try? transport.close(code: error.closeCode, reason: "framing error")
        }
    }

    /// One message as the script sees it: after ``Configuration/messageFraming``, if any.
    private func received(_ message: ByteBuffer, kind: MessageKind) {
        if case .message(reply: .matching)? = heartbeat.configuration?.probe,
            delegate?.managedConnection(self, isHeartbeatReply: message, kind: kind) == true {
            heartbeat.didReceiveReply()
            return
        }
        // Any message answers a `reply`-less probe: the next one is due an interval from now.
        heartbeat.didReceiveMessage()
        if let (reply, replyKind) = core.autoReply?.answer(to: message, kind: kind) {
            answerProbe(reply, kind: replyKind)
            return
        }
        recorder?.message(message, kind: kind, outgoing: false)
        delegate?.managedConnection(self, didReceive: message, kind: kind)
    }

    public func connection(_ connection: ClientConnection, didReceivePong payload: ByteBuffer) {
        if tracing, let logger { logger.trace("\(ConnectionLog.control(.inbound, "pong", payload))") }
        recorder?.control("pong", payload: payload, outgoing: false)
        heartbeat.didReceivePong(payload)
        delegate?.managedConnection(self, didReceivePong: payload)
    }

    public func session(_ connection: ClientConnection, didFail error: ConnectionError) {
        guard !ignoringTransport else { return }
        drive(lifecycle.failed(error))
    }

    public func session(_ connection: ClientConnection, didClose info: CloseInfo) {
        outbound.detach()
        openingHandlers = false
        guard !ignoringTransport else { return }
        drive(lifecycle.closed(info))
    }
}

/// The outbound budget's events; what it writes goes straight to the connection's handler.
extension ManagedConnection: OutboundWriter {
    func outboundWrote(messages: Int, payloadBytes: Int) {
        transport.countSent(bytes: payloadBytes, messages: messages)
        heartbeat.didSend()
    }

    /// The handler refused a message: only an open connection's refusal means it cannot
    /// carry it (a TCP framing's limits).
    var outboundTransportIsOpen: Bool { transport.state == .open }

    func outboundDrained() {
        delegate?.managedConnectionDidDrain(self)
    }

    func outboundFirstReachedBudget() {
        delegate?.managedConnectionReachedBudget(self)
    }
}
