#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A WebSocket client connection bound to one event loop.
///
/// The object outlives its transport: after it closed (or failed to open) it can be dialled
/// again with ``connect(to:)``, which is what reconnection builds on. All methods must be
/// called on ``eventLoop``; delegate methods are called there too, synchronously. There
/// is no locking and no async/await on the message path.
///
/// ```swift
/// let loop = group.next()
/// loop.execute {
///     let c = WebSocketConnection(url: try! WebSocketURL("ws://127.0.0.1:9001/"), eventLoop: loop)
///     c.delegate = myDelegate
///     c.connect()
/// }
/// // later, from myDelegate.connectionDidOpen:
/// try c.send(ByteBuffer(string: "hello"), kind: .text)
/// try c.close(code: 1000, reason: "bye")
/// ```
public final class WebSocketConnection {
    /// Where the connection stands.
    public enum State: String, Sendable, Hashable {
        /// Created, never dialled.
        case idle
        /// DNS, TCP, TLS or the HTTP upgrade is under way.
        case connecting
        /// Messages flow.
        case open
        /// Our close frame is out; waiting for the peer's.
        case closing
        /// Ended (or failed to open); ``connect(to:)`` may dial again.
        case closed
    }

    /// The loop everything happens on.
    public let eventLoop: EventLoop
    /// The URL of the current (or last) dial.
    public private(set) var url: WebSocketURL
    /// Options used by the next dial.
    public var options: WebSocketClientOptions {
        didSet { self.sslContext = nil }
    }
    /// Receives the connection's events; held weakly.
    public weak var delegate: WebSocketConnectionDelegate?
    /// The current state.
    public private(set) var state: State = .idle
    /// Message and byte counters since the object was created.
    public private(set) var stats = WebSocketConnectionStats()

    /// Identifies the current dial; callbacks from an earlier dial's channel are ignored.
    private var generation = 0
    private var channel: Channel?
    private var handler: WebSocketHandler<WebSocketConnection>?
    private var connectTimer: Scheduled<Void>?
    private var upgrader: WebSocketClientUpgrader?
    private var pinVerifier: TLSPinVerifier?
    /// The proxy of the current dial, if any.
    private var proxy: ProxySettings?
    /// What the current dial's certificate checks saw, for a refusal in words.
    private var verifyReport: TLSVerifyReport?
    /// Loading trust roots is costly, so the context is kept across re-dials.
    private var sslContext: NIOSSLContext?
    private let dialTimer = DialTimer()

    /// Creates an idle connection; nothing happens until ``connect(to:)``.
    public init(url: WebSocketURL, options: WebSocketClientOptions = WebSocketClientOptions(), eventLoop: EventLoop) {
        self.url = url
        self.options = options
        self.eventLoop = eventLoop
    }

    deinit {
        // Only a dial can be in flight here: an open connection is kept alive by its channel.
        self.channel?.close(promise: nil)
    }

    /// The channel of the current dial, for diagnostics and tests.
    public var currentChannel: Channel? { self.channel }

    // MARK: Dialling

    /// Starts a dial to `url` (or the previous URL). Returns at once; the outcome arrives as
    /// `connectionDidOpen` or `didFail`. Throws if a dial is under way or the connection is
    /// open.
    public func connect(to url: WebSocketURL? = nil) throws(WebSocketUsageError) {
        self.eventLoop.preconditionInEventLoop()
        guard self.state == .idle || self.state == .closed else {
            throw WebSocketUsageError("cannot connect: the connection is \(self.state.rawValue)")
        }
        if let url { self.url = url }
        self.generation += 1
        let generation = self.generation
        self.state = .connecting
        self.pinVerifier = nil
        self.verifyReport = nil
        self.proxy = nil
        self.upgrader = nil
        self.dialTimer.start(hostIsIPAddress: self.url.hostIsIPAddress)

        let timeout = self.options.connectTimeout
        self.connectTimer = self.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            self.dialFailed(
                generation,
                DialError.timedOut(hostPort: self.url.hostHeader, timeout: timeout, proxy: self.proxy)
            )
        }

        let proxy: ProxySettings?
        do {
            proxy = try self.options.proxy.resolve(for: .webSocket(self.url))
        } catch {
            self.eventLoop.assumeIsolated().execute { self.dialFailed(generation, error) }
            return
        }
        self.proxy = proxy
        let bound = NIOLoopBound(self, eventLoop: self.eventLoop)
        ClientDialer.dial(
            on: self.eventLoop, host: self.url.host, port: self.url.port, proxy: proxy, timeout: timeout,
            adopt: { channel in try bound.value.adopt(channel, generation: generation) },
            configure: { channel in try bound.value.configure(channel, generation: generation) }
        ).assumeIsolated().whenComplete { result in
            switch result {
            case .success(let channel):
                if generation != self.generation || self.state != .connecting {
                    channel.close(promise: nil)
                }
            case .failure(let error):
                self.dialFailed(generation, self.classify(error))
            }
        }
    }

    private func adopt(_ channel: Channel, generation: Int) throws {
        guard generation == self.generation, self.state == .connecting else {
            throw WebSocketUsageError("dial superseded")
        }
        self.channel = channel
    }

    private func configure(_ channel: Channel, generation: Int) throws {
        guard generation == self.generation, self.state == .connecting else {
            throw WebSocketUsageError("dial superseded")
        }
        let pipeline = channel.pipeline.syncOperations
        if self.url.secure {
            let context = try self.sslContext ?? self.options.tls.makeContext()
            self.sslContext = context
            let client = try self.options.tls.makeClientHandler(context: context, host: self.url.host, hostIsIPAddress: self.url.hostIsIPAddress, throughProxy: self.proxy != nil)
            (self.pinVerifier, self.verifyReport) = (client.pins, client.report)
            try pipeline.addHandler(client.handler)
        }
        try pipeline.addHandler(self.dialTimer.handler(secure: self.url.secure))

        let upgrader = WebSocketClientUpgrader(
            protocols: self.options.protocols,
            deflateOffer: self.options.compress ? self.options.deflate : nil,
            onUpgrade: { [weak self] context, response, negotiation in
                guard let self else { throw WebSocketUsageError("connection released") }
                try self.upgraded(context: context, response: response, negotiation: negotiation, generation: generation)
            }
        )
        self.upgrader = upgrader
        try pipeline.addHTTPClientHandlers(
            leftOverBytesStrategy: .forwardBytes,
            withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in })
        )
        try pipeline.addHandler(
            WebSocketHandshakeHandler(request: self.requestHead()) { [weak self] error in
                guard let self else { return }
                self.dialFailed(generation, self.classify(error))
            }
        )
    }

    private func requestHead() -> HTTPRequestHead {
        var headers = HTTPHeaders()
        if !self.options.headers.contains(where: { $0.0.lowercased() == "host" }) {
            headers.add(name: "Host", value: self.url.hostHeader)
        }
        if let origin = self.options.origin {
            headers.add(name: "Origin", value: origin)
        }
        for (name, value) in self.options.headers {
            headers.add(name: name, value: value)
        }
        return HTTPRequestHead(version: .http1_1, method: .GET, uri: self.url.requestTarget, headers: headers)
    }

    private func upgraded(
        context: ChannelHandlerContext,
        response: HTTPResponseHead,
        negotiation: WebSocketNegotiation,
        generation: Int
    ) throws {
        guard generation == self.generation, self.state == .connecting else {
            throw WebSocketUsageError("dial superseded")
        }
        let deflate: PerMessageDeflate?
        do {
            deflate = try negotiation.deflate.map { try PerMessageDeflate(parameters: $0) }
        } catch {
            throw WebSocketConnectionError.handshake("cannot set up compression: \(error)")
        }
        let handler = WebSocketHandler(
            role: .client, owner: self, maxMessage: self.options.maxMessage, deflate: deflate,
            closeTimeout: self.options.closeTimeout, fragmentSize: self.options.fragmentSize
        )
        let pipeline = context.pipeline.syncOperations
        let handshake = try pipeline.handler(type: WebSocketHandshakeHandler.self)
        pipeline.removeHandler(handshake, promise: nil)
        try pipeline.addHandler(handler)
        self.handler = handler
        self.connectTimer?.cancel()
        self.connectTimer = nil
        self.state = .open
        let info = WebSocketOpenInfo(
            subprotocol: negotiation.subprotocol, headers: response.headers, compression: negotiation.deflate,
            timing: self.dialTimer.finish(secure: self.url.secure, handshake: true)
        )
        self.delegate?.connectionDidOpen(self, info: info)
    }

    private func dialFailed(_ generation: Int, _ error: WebSocketConnectionError) {
        guard generation == self.generation, self.state == .connecting else { return }
        self.state = .closed
        self.connectTimer?.cancel()
        self.connectTimer = nil
        self.channel?.close(promise: nil)
        self.channel = nil
        self.upgrader = nil
        self.delegate?.connection(self, didFail: error)
    }

    // MARK: Using an open connection

    /// Sends a whole message. Throws when the connection is not open (the caller decides
    /// whether to queue).
    public func send(_ data: ByteBuffer, kind: WebSocketMessageKind) throws(WebSocketUsageError) {
        self.eventLoop.assertInEventLoop()
        guard let handler = self.handler else { throw WebSocketUsageError("connection is not open") }
        try handler.send(data, kind: kind)
        self.stats.messagesSent += 1
        self.stats.bytesSent += data.readableBytes
    }

    /// Sends a whole message from bytes valid for the duration of the call, without first
    /// copying them into a buffer of their own (see ``Transport/send(bytes:kind:)``).
    public func send(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind) throws(WebSocketUsageError) {
        self.eventLoop.assertInEventLoop()
        guard let handler = self.handler else { throw WebSocketUsageError("connection is not open") }
        try handler.send(bytes: bytes, kind: kind)
        self.stats.messagesSent += 1
        self.stats.bytesSent += bytes.count
    }

    /// See ``Transport/frame(bytes:kind:)``.
    public func frame(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind) -> ByteBuffer? {
        self.eventLoop.assertInEventLoop()
        return self.handler?.frame(bytes: bytes, kind: kind)
    }

    /// See ``Transport/appendFrame(bytes:kind:to:)``.
    public func appendFrame(bytes: UnsafeRawBufferPointer, kind: WebSocketMessageKind, to frames: inout ByteBuffer) -> Bool {
        self.eventLoop.assertInEventLoop()
        return self.handler?.appendFrame(bytes: bytes, kind: kind, to: &frames) ?? false
    }

    /// See ``Transport/sendFrame(_:payloadSize:messages:)``.
    public func sendFrame(_ frame: ByteBuffer, payloadSize: Int, messages: Int) throws(WebSocketUsageError) {
        self.eventLoop.assertInEventLoop()
        guard let handler = self.handler else { throw WebSocketUsageError("connection is not open") }
        try handler.sendFrame(frame)
        self.stats.messagesSent += messages
        self.stats.bytesSent += payloadSize
    }

    /// Sends one fragment of a message built piece by piece; the message ends with the
    /// fragment whose `isFinal` is true. Other messages cannot be sent in between.
    public func sendFragment(_ data: ByteBuffer, kind: WebSocketMessageKind, isFinal: Bool) throws(WebSocketUsageError) {
        self.eventLoop.assertInEventLoop()
        guard let handler = self.handler else { throw WebSocketUsageError("connection is not open") }
        try handler.sendFragment(data, kind: kind, isFinal: isFinal)
        if isFinal { self.stats.messagesSent += 1 }
        self.stats.bytesSent += data.readableBytes
    }

    /// Sends a ping now (at most 125 bytes of payload).
    public func ping(_ payload: ByteBuffer = ByteBuffer()) throws(WebSocketUsageError) {
        self.eventLoop.assertInEventLoop()
        guard let handler = self.handler else { throw WebSocketUsageError("connection is not open") }
        try handler.ping(payload)
    }

    /// Starts the close handshake. `code` must be one a close frame may carry (1000, 3000–4999,
    /// ...) and `reason` at most 123 bytes of UTF-8. Closing a connection that is still
    /// dialling abandons the dial (no event follows); closing one that is closing or closed
    /// does nothing.
    public func close(code: UInt16 = WebSocketCloseCode.normal, reason: String = "") throws(WebSocketUsageError) {
        self.eventLoop.assertInEventLoop()
        let close: WebSocketClose
        do {
            close = try WebSocketClose(code: Int(code), reason: reason)
        } catch {
            throw WebSocketUsageError(error)
        }
        switch self.state {
        case .connecting:
            self.abandonDial()
        case .open:
            self.state = .closing
            self.handler?.close(close)
        case .idle, .closing, .closed:
            break
        }
    }

    /// Gives up a dial under way: its late events are ignored (the generation moved on).
    private func abandonDial() {
        self.generation += 1
        self.state = .closed
        self.connectTimer?.cancel()
        self.channel?.close(promise: nil)
        self.channel = nil
    }

    /// Drops the transport without a close handshake (a dead peer). An open connection
    /// reports `didClose` with 1006, initiated by the network.
    public func abort() {
        self.eventLoop.assertInEventLoop()
        switch self.state {
        case .connecting:
            self.abandonDial()
        case .open, .closing:
            self.handler?.abort()
        case .idle, .closed:
            break
        }
    }

    // MARK: Events from the channel handler

    func handlerReceived(_ message: ByteBuffer, kind: WebSocketMessageKind) {
        self.stats.messagesReceived += 1
        self.stats.bytesReceived += message.readableBytes
        self.delegate?.connection(self, didReceive: message, kind: kind)
    }

    func handlerReceivedPong(_ payload: ByteBuffer) {
        self.delegate?.connection(self, didReceivePong: payload)
    }

    func handlerFailed(_ error: WebSocketConnectionError) {
        self.state = .closing
        self.delegate?.connection(self, didFail: error)
    }

    func handlerClosed(_ info: WebSocketCloseInfo) {
        self.state = .closed
        self.handler = nil
        self.channel = nil
        self.delegate?.connection(self, didClose: info)
    }

    // MARK: Error reporting

    /// Upgrade failures are this transport's own; the rest (DNS, connect, TLS, pins,
    /// timeout) read the same for every transport.
    private func classify(_ error: Error) -> WebSocketConnectionError {
        switch error {
        case let error as NIOHTTPClientUpgradeError where self.pinVerifier?.mismatch == nil:
            if error == .upgraderDeniedUpgrade, let rejection = self.upgrader?.rejection {
                return rejection
            }
            if error == .responseProtocolNotFound {
                return .handshake("101 response without Upgrade: websocket", status: 101)
            }
            return .handshake("upgrade failed (\(error))")
        case let error as HTTPParserError where self.pinVerifier?.mismatch == nil:
            return .handshake("malformed HTTP response (\(error))")
        default:
            return DialError.classify(
                error, hostPort: self.url.hostHeader, timeout: self.options.connectTimeout,
                pinMismatch: self.pinVerifier?.mismatch, pins: self.options.tls.pinList,
                verify: self.verifyReport, proxy: self.proxy
            )
        }
    }
}
