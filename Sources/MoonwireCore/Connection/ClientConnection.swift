import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A client connection to one peer, bound to one event loop: a WebSocket (`ws://`,
/// `wss://`) or a framed TCP stream (`tcp://`, `tls://`), dialled the same way.
///
/// One dial for both: DNS and TCP (through a proxy's tunnel when one is set), TLS for
/// `wss://` and `tls://`, then the WebSocket upgrade and its handler, or the framing's
/// handler. One timer bounds the whole dial, ``ConnectTiming`` times its steps and a
/// failure is named by the step it failed in (`dns`, `connect`, `tls`, `handshake`,
/// `timeout`). Once open, the connection sends and receives whole messages; a framing
/// error by a TCP peer is a `protocol` failure followed by the close, as a WebSocket
/// protocol violation is.
///
/// The object outlives its socket: after it closed (or failed to open) it can be
/// dialled again with ``connect(to:)``, which is what reconnection builds on. All
/// methods must be called on ``eventLoop``; the delegate is called there, synchronously.
/// There is no locking and no async/await on the message path.
///
/// Close codes follow WebSocket's for both transports: a TCP connection reports 1000 for
/// an orderly end (FIN, either side), 1006 for a drop (reset, abort, heartbeat), and for a
/// framing error the code the WebSocket equivalent earns (1009 over a limit, else 1002).
///
/// ```swift
/// loop.execute {
///     let c = ClientConnection(url: try! WebSocketURL("ws://127.0.0.1:9001/"), eventLoop: loop)
///     c.delegate = events
///     try! c.connect()
/// }
/// // later, from events.connectionDidOpen:
/// try c.send(ByteBuffer(string: "hello"), kind: .text)
/// try c.close(code: 1000, reason: "bye")
/// ```
public final class ClientConnection {
    /// Where the connection stands.
    public enum State: String, Sendable, Hashable {
        /// Created, never dialled.
        case idle
        /// DNS, TCP, TLS or the WebSocket upgrade is under way.
        case connecting
        /// Messages flow.
        case open
        /// Ending: our close frame is out (or, for TCP, pending writes drain before FIN).
        case closing
        /// Ended (or failed to open); ``connect(to:)`` may dial again.
        case closed
    }

    /// What is dialled: the URL, with the options of its kind.
    private enum Target {
        case webSocket(WebSocketURL, WebSocketClientOptions)
        case tcp(TCPURL, TCPClientOptions)
    }

    /// The handler that carries the messages of the open connection.
    typealias Link = ChannelLink<ClientConnection>

    /// The loop everything happens on.
    public let eventLoop: EventLoop
    /// Receives the connection's events; held strongly, so that a message reaches it
    /// without a weak load. Whoever sets it cuts the link once it wants no more events
    /// (``ManagedConnection`` is set while it is alive, and cut once it has ended for
    /// good): an open connection is kept alive by its channel, and with it its delegate.
    public var delegate: (any ClientConnectionDelegate)?
    /// The current state.
    public private(set) var state: State = .idle
    /// Message and byte counters since the object was created, across re-dials.
    public private(set) var stats = ConnectionStats()

    private var target: Target
    /// Identifies the current dial; callbacks from an earlier dial's channel are ignored.
    private var generation = 0
    private var channel: Channel?
    /// Set when the connection opens; nil before and after.
    private var link: Link?
    /// A TCP dial's framing handler, in the pipeline from the start, until the open.
    private var framedDuringDial: FramedChannelHandler?
    /// A WebSocket dial's upgrader, which knows why it refused an upgrade.
    private var upgrader: WebSocketClientUpgrader?
    private var connectTimer: ClockTask?
    private var pinVerifier: TLSPinVerifier?
    /// The proxy of the current dial, if any.
    private var proxy: ProxySettings?
    /// What the current dial's certificate checks saw, for a refusal in words.
    private var verifyReport: TLSVerifyReport?
    /// Loading trust roots is costly, so the context is kept across re-dials.
    private var sslContext: NIOSSLContext?
    private let dialTimer = DialTimer()

    /// A WebSocket connection, idle until ``connect(to:)``.
    public init(url: WebSocketURL, options: WebSocketClientOptions = WebSocketClientOptions(), eventLoop: EventLoop) {
        self.target = .webSocket(url, options)
        self.eventLoop = eventLoop
    }

    /// A `tcp://` or `tls://` connection, idle until ``connect(to:)``.
    public init(url: TCPURL, options: TCPClientOptions = TCPClientOptions(), eventLoop: EventLoop) {
        self.target = .tcp(url, options)
        self.eventLoop = eventLoop
    }

    /// A connection for `url`, with the options of its kind, idle until ``connect(to:)``.
    public convenience init(
        url: TransportURL,
        webSocket: WebSocketClientOptions = WebSocketClientOptions(),
        tcp: TCPClientOptions = TCPClientOptions(),
        eventLoop: EventLoop
    ) {
        switch url {
        case .webSocket(let url): self.init(url: url, options: webSocket, eventLoop: eventLoop)
        case .tcp(let url): self.init(url: url, options: tcp, eventLoop: eventLoop)
        }
    }

    deinit {
        // Only a dial never started can be here: a dial under way is held by its timer and
        // its channel's handlers, an open connection by its channel.
        self.channel?.close(promise: nil)
    }

    /// Where the current (or last) dial went.
    public var url: TransportURL {
        switch self.target {
        case .webSocket(let url, _): return .webSocket(url)
        case .tcp(let url, _): return .tcp(url)
        }
    }

    /// False for TCP, which has no ping: a heartbeat must use a message.
    public var supportsPing: Bool {
        if case .webSocket = self.target { return true }
        return false
    }

    /// The channel of the current dial (for the outbound budget and read pausing).
    public var currentChannel: Channel? { self.channel }

    /// The WebSocket handshake headers of the next dials (`on_reconnect`'s `headers`);
    /// TCP has none.
    public func setHandshakeHeaders(_ headers: [(String, String)]) {
        guard case .webSocket(let url, var options) = self.target else { return }
        options.headers = headers
        self.target = .webSocket(url, options)
    }

    // MARK: Dialling

    /// Starts a dial to `url` (same kind: WebSocket or TCP) or the previous URL. Returns at
    /// once; the outcome arrives as `connectionDidOpen` or `didFail`. Throws if a dial is
    /// under way, the connection is open, the URL is of the other kind, or the framing
    /// options are invalid.
    public func connect(to url: TransportURL? = nil) throws(UsageError) {
        self.eventLoop.preconditionInEventLoop()
        let target: Target
        switch (self.target, url) {
        case (_, nil): target = self.target
        case (.webSocket(_, let options), .webSocket(let url)?): target = .webSocket(url, options)
        case (.tcp(_, let options), .tcp(let url)?): target = .tcp(url, options)
        case (_, let other?): throw .otherTransport(other)
        }
        guard self.state == .idle || self.state == .closed else {
            throw .cannotConnect(self.state)
        }
        if case .tcp(_, let options) = target { try options.framing.validate() }
        self.target = target
        self.generation += 1
        let generation = self.generation
        self.state = .connecting
        self.pinVerifier = nil
        self.verifyReport = nil
        self.proxy = nil
        self.upgrader = nil
        let endpoint = self.endpoint
        self.dialTimer.start(hostIsIPAddress: endpoint.hostIsIPAddress)

        self.connectTimer = RuntimeClock.of(self.eventLoop).scheduleTask(on: self.eventLoop, in: endpoint.timeout) {
            self.dialFailed(generation, DialError.timedOut(hostPort: endpoint.hostPort, timeout: endpoint.timeout, proxy: self.proxy))
        }
        let proxy: ProxySettings?
        do {
            proxy = try endpoint.proxy.resolve(for: self.url)
        } catch {
            self.eventLoop.assumeIsolated().execute { self.dialFailed(generation, error) }
            return
        }
        self.proxy = proxy
        let bound = NIOLoopBound(self, eventLoop: self.eventLoop)
        ClientDialer.dial(
            on: self.eventLoop, host: endpoint.host, port: endpoint.port, proxy: proxy, timeout: endpoint.timeout,
            adopt: { channel in try bound.value.adopt(channel, generation: generation) },
            configure: { channel in try bound.value.configure(channel, generation: generation) }
        ).assumeIsolated().whenComplete { result in
            switch result {
            case .success(let channel):
                guard generation == self.generation, self.state == .connecting else {
                    // A superseded dial's channel is closed here; a failed one's already was.
                    if generation != self.generation { channel.close(promise: nil) }
                    return
                }
                // Plain TCP is open now; TLS waits for its handshake, WebSocket for the upgrade.
                if case .tcp(let url, _) = self.target, !url.secure, let framed = self.framedDuringDial {
                    self.opened(generation, link: .tcp(framed), info: ConnectionOpenInfo())
                }
            case .failure(let error):
                self.dialFailed(generation, self.classify(error))
            }
        }
    }

    /// What every dial needs of the target, whatever its kind.
    private var endpoint: (
        host: String, port: Int, hostIsIPAddress: Bool, secure: Bool, hostPort: String,
        timeout: TimeAmount, tls: TLSOptions, proxy: ProxyChoice
    ) {
        switch self.target {
        case .webSocket(let url, let options):
            return (url.host, url.port, url.hostIsIPAddress, url.secure, url.hostHeader, options.connectTimeout, options.tls, options.proxy)
        case .tcp(let url, let options):
            return (url.host, url.port, url.hostIsIPAddress, url.secure, url.hostPort, options.connectTimeout, options.tls, options.proxy)
        }
    }

    private func adopt(_ channel: Channel, generation: Int) throws {
        guard generation == self.generation, self.state == .connecting else {
            throw UsageError.dialSuperseded
        }
        self.channel = channel
    }

    /// Adds the dial's handlers once bytes flow to the target: TLS (and the step timer),
    /// then the WebSocket upgrade or the framing.
    private func configure(_ channel: Channel, generation: Int) throws {
        guard generation == self.generation, self.state == .connecting else {
            throw UsageError.dialSuperseded
        }
        let pipeline = channel.pipeline.syncOperations
        let endpoint = self.endpoint
        if endpoint.secure {
            let context = try self.sslContext ?? endpoint.tls.makeContext()
            self.sslContext = context
            let client = try endpoint.tls.makeClientHandler(
                context: context, host: endpoint.host, hostIsIPAddress: endpoint.hostIsIPAddress, throughProxy: self.proxy != nil
            )
            (self.pinVerifier, self.verifyReport) = (client.pins, client.report)
            try pipeline.addHandler(client.handler)
        }
        switch self.target {
        case .webSocket(let url, let options):
            try pipeline.addHandler(self.dialTimer.handler(secure: endpoint.secure))
            try self.addUpgrade(to: pipeline, url: url, options: options, generation: generation)
        case .tcp(_, let options):
            if endpoint.secure {
                // The connection opens when the TLS handshake is done, not when TCP is.
                try pipeline.addHandler(TLSHandshakeWatcher { result in
                    switch result {
                    case .success:
                        if let framed = self.framedDuringDial {
                            self.opened(generation, link: .tcp(framed), info: ConnectionOpenInfo())
                        }
                    case .failure(let error):
                        self.dialFailed(generation, self.classify(error))
                    }
                })
            }
            try pipeline.addHandler(self.dialTimer.handler(secure: endpoint.secure))
            let framed = FramedChannelHandler(framing: options.framing, closeTimeout: options.closeTimeout, owner: self)
            try pipeline.addHandler(framed)
            self.framedDuringDial = framed
        }
    }

    /// The HTTP upgrade: its request goes out once TCP (and TLS) is up; the `101` installs
    /// the WebSocket handler.
    private func addUpgrade(
        to pipeline: ChannelPipeline.SynchronousOperations, url: WebSocketURL, options: WebSocketClientOptions, generation: Int
    ) throws {
        let upgrader = WebSocketClientUpgrader(
            protocols: options.protocols,
            deflateOffer: options.compress ? options.deflate : nil,
            onUpgrade: { context, response, negotiation in
                try self.upgraded(context: context, response: response, negotiation: negotiation, options: options, generation: generation)
            }
        )
        self.upgrader = upgrader
        try pipeline.addHTTPClientHandlers(
            leftOverBytesStrategy: .forwardBytes,
            withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in })
        )
        try pipeline.addHandler(
            WebSocketHandshakeHandler(request: Self.requestHead(url: url, options: options)) { error in
                self.dialFailed(generation, self.classify(error))
            }
        )
    }

    private static func requestHead(url: WebSocketURL, options: WebSocketClientOptions) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        if !options.headers.contains(where: { $0.0.lowercased() == "host" }) {
            headers.add(name: "Host", value: url.hostHeader)
        }
        if let origin = options.origin {
            headers.add(name: "Origin", value: origin)
        }
        for (name, value) in options.headers {
            headers.add(name: name, value: value)
        }
        if let credentials = url.credentials, !headers.contains(name: "Authorization") {
            headers.add(name: "Authorization", value: credentials.basic)
        }
        return HTTPRequestHead(version: .http1_1, method: .GET, uri: url.requestTarget, headers: headers)
    }

    private func upgraded(
        context: ChannelHandlerContext,
        response: HTTPResponseHead,
        negotiation: WebSocketNegotiation,
        options: WebSocketClientOptions,
        generation: Int
    ) throws {
        guard generation == self.generation, self.state == .connecting else {
            throw UsageError.dialSuperseded
        }
        let deflate: PerMessageDeflate?
        do {
            deflate = try negotiation.deflate.map { try PerMessageDeflate(parameters: $0) }
        } catch {
            throw ConnectionError.handshake("cannot set up compression: \(error)")
        }
        let handler = WebSocketHandler(
            role: .client, owner: self, maxMessage: options.maxMessage, deflate: deflate,
            closeTimeout: options.closeTimeout, fragmentSize: options.fragmentSize
        )
        let pipeline = context.pipeline.syncOperations
        let handshake = try pipeline.handler(type: WebSocketHandshakeHandler.self)
        pipeline.removeHandler(handshake, promise: nil)
        try pipeline.addHandler(handler)
        let info = ConnectionOpenInfo(subprotocol: negotiation.subprotocol, headers: response.headers, compression: negotiation.deflate)
        self.opened(generation, link: .webSocket(handler), info: info)
    }

    /// The dial is done: TCP (and TLS) up, and for WebSocket the upgrade.
    private func opened(_ generation: Int, link: Link, info: ConnectionOpenInfo) {
        guard generation == self.generation, self.state == .connecting else { return }
        self.connectTimer?.cancel()
        self.connectTimer = nil
        self.framedDuringDial = nil
        self.upgrader = nil
        self.link = link
        self.state = .open
        var info = info
        let handshake: Bool
        if case .webSocket = link { handshake = true } else { handshake = false }
        info.timing = self.dialTimer.finish(secure: self.endpoint.secure, handshake: handshake)
        self.delegate?.connectionDidOpen(self, info: info)
    }

    private func dialFailed(_ generation: Int, _ error: ConnectionError) {
        guard generation == self.generation, self.state == .connecting else { return }
        self.endDial()
        self.delegate?.session(self, didFail: error)
    }

    /// Gives up a dial under way: its late events are ignored (the generation moved on).
    private func abandonDial() {
        self.generation += 1
        self.endDial()
    }

    private func endDial() {
        self.state = .closed
        self.connectTimer?.cancel()
        self.connectTimer = nil
        // Its channel's close must not reach a later dial.
        self.framedDuringDial?.detach()
        self.framedDuringDial = nil
        self.channel?.close(promise: nil)
        self.channel = nil
        self.upgrader = nil
    }

    /// Names the step a dial failed in. The upgrader words the WebSocket upgrade's own
    /// failures; the rest (DNS, connect, TLS, pins, timeout) read the same for both kinds.
    private func classify(_ error: Error) -> ConnectionError {
        let endpoint = self.endpoint
        if case .webSocket = self.target, self.pinVerifier?.mismatch == nil,
            let failure = WebSocketClientUpgrader.handshakeFailure(error, rejection: self.upgrader?.rejection) {
            return failure
        }
        return DialError.classify(
            error, hostPort: endpoint.hostPort, timeout: endpoint.timeout,
            pinMismatch: self.pinVerifier?.mismatch, pins: endpoint.tls.pinList,
            verify: self.verifyReport, proxy: self.proxy
        )
    }

    // MARK: Using an open connection

    /// Sends a whole message (TCP: framed by the connection's framing; `kind` is ignored).
    /// Throws when the connection is not open or the framing cannot carry the message
    /// (wrong fixed size, delimiter inside); the caller decides whether to queue. The bare
    /// connection has no send budget: ``ManagedConnection`` puts one in front of it, whose
    /// ``OutboundBuffer`` writes to the handler and never calls this.
    public func send(_ data: ByteBuffer, kind: MessageKind) throws(UsageError) {
        guard let link = self.link else { throw .notOpen }
        try link.send(data, kind: kind)
        self.stats.countSent(bytes: data.readableBytes)
    }

    /// The open connection's handler, for the outbound budget to write to; nil when not open.
    var outboundLink: OutboundLink? { self.link?.outbound }

    /// Counts messages the outbound budget wrote to the handler.
    func countSent(bytes: Int, messages: Int) {
        self.stats.countSent(bytes: bytes, messages: messages)
    }

    /// Sends one fragment of a WebSocket message built piece by piece; the message ends
    /// with the fragment whose `isFinal` is true. Other messages cannot be sent in between.
    public func sendFragment(_ data: ByteBuffer, kind: MessageKind, isFinal: Bool) throws(UsageError) {
        switch self.link {
        case .webSocket(let handler)?: try handler.sendFragment(data, kind: kind, isFinal: isFinal)
        case .tcp?: throw .noFragments
        case nil: throw .notOpen
        }
        self.stats.countSent(bytes: data.readableBytes, messages: isFinal ? 1 : 0)
    }

    /// Sends a WebSocket ping now (at most 125 bytes of payload); throws for TCP.
    public func ping(_ payload: ByteBuffer = ByteBuffer()) throws(UsageError) {
        guard case .webSocket = self.target else { throw .noPing }
        guard let link = self.link else { throw .notOpen }
        try link.ping(payload)
    }

    /// Ends the connection in order. WebSocket: the close handshake; `code` must be one a
    /// close frame may carry (1000, 3000–4999, ...) and `reason` at most 123 bytes of UTF-8.
    /// TCP: FIN once pending writes went out; the close is reported with `code` and
    /// `reason`, which do not go on the wire. Closing a connection that is still dialling
    /// abandons the dial (no event follows); closing one that is closing or closed does
    /// nothing.
    public func close(code: UInt16 = CloseCode.normal, reason: String = "") throws(UsageError) {
        self.eventLoop.assertInEventLoop()
        var frame: WebSocketClose?
        if case .webSocket = self.target {
            do {
                frame = try WebSocketClose(code: Int(code), reason: reason)
            } catch {
                throw .control(error)
            }
        }
        switch self.state {
        case .connecting:
            self.abandonDial()
        case .open:
            self.state = .closing
            self.link?.close(frame, code: code, reason: reason)
        case .idle, .closing, .closed:
            break
        }
    }

    /// Drops the connection now, without a close handshake or waiting for pending writes
    /// (a dead peer). An open connection reports `didClose` with 1006, by the network.
    public func abort() {
        self.eventLoop.assertInEventLoop()
        switch self.state {
        case .connecting:
            self.abandonDial()
        case .open, .closing:
            self.link?.abort(reset: false, reason: "")
        case .idle, .closed:
            break
        }
    }
}

// MARK: Events from the channel handlers

extension ClientConnection: ChannelOwner {
    static func budgetLink(_ handler: WebSocketHandler<ClientConnection>) -> OutboundLink? { .clientWebSocket(handler) }

    // Only the open connection's handler is still attached (dials that failed or were
    // abandoned detach theirs; a TLS handshake cut short is reported by the watcher).

    /// A whole message from the peer.
    func handlerReceived(_ message: ByteBuffer, kind: MessageKind) {
        guard self.state == .open || self.state == .closing else { return }
        self.stats.countReceived(bytes: message.readableBytes)
        self.delegate?.session(self, didReceive: message, kind: kind)
    }

    func handlerReceivedPong(_ payload: ByteBuffer) {
        self.delegate?.connection(self, didReceivePong: payload)
    }

    /// The peer broke the protocol or the framing; the close report follows.
    func handlerFailed(_ error: ConnectionError) {
        guard self.state == .open || self.state == .closing else { return }
        self.state = .closing
        self.delegate?.session(self, didFail: error)
    }

    /// The open connection ended.
    func handlerClosed(_ info: CloseInfo) {
        guard self.state == .open || self.state == .closing else { return }
        self.state = .closed
        self.link = nil
        self.channel = nil
        self.delegate?.session(self, didClose: info)
    }
}
