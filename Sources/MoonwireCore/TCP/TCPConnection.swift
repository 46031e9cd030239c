import NIOCore
import NIOPosix
import NIOSSL

/// A `tcp://` or `tls://` client connection bound to one event loop, delivering the
/// messages its ``TCPFraming`` cuts out of the byte stream.
///
/// The same shape as ``WebSocketConnection``: the object outlives its socket and can be
/// dialled again after it closed; all methods must be called on ``eventLoop`` and the
/// delegate is called there, synchronously. Dial failures are named `dns`, `connect`,
/// `tls` or `timeout`; a framing error by the peer is a `protocol` failure followed by the
/// close. Close codes: see ``Transport``.
///
/// ```swift
/// loop.execute {
///     var options = TCPClientOptions()
///     options.framing = .length(LengthPrefix(bytes: 4))
///     let c = TCPConnection(url: try! TCPURL("tcp://127.0.0.1:7000"), options: options, eventLoop: loop)
///     c.delegate = events
///     try! c.connect()
/// }
/// // later, from events.transportDidOpen:
/// try c.send(ByteBuffer(string: "hello"))
/// c.close()
/// ```
public final class TCPConnection {
    /// The loop everything happens on.
    public let eventLoop: EventLoop
    /// The URL of the current (or last) dial.
    public private(set) var url: TCPURL
    /// Options used by the next dial.
    public var options: TCPClientOptions {
        didSet { self.sslContext = nil }
    }
    /// Receives the connection's events; held weakly.
    public weak var delegate: TransportDelegate?
    /// The current state.
    public private(set) var state: TransportState = .idle
    /// Message and byte counters since the object was created.
    public private(set) var stats = TransportStats()

    private var generation = 0
    private var channel: Channel?
    private var handler: FramedChannelHandler?
    private var connectTimer: ClockTask?
    private var pinVerifier: TLSPinVerifier?
    private var sslContext: NIOSSLContext?
    /// The proxy of the current dial, if any.
    private var proxy: ProxySettings?
    /// What the current dial's certificate checks saw, for a refusal in words.
    private var verifyReport: TLSVerifyReport?
    private let dialTimer = DialTimer()

    /// Creates an idle connection; nothing happens until ``connect(to:)``.
    public init(url: TCPURL, options: TCPClientOptions = TCPClientOptions(), eventLoop: EventLoop) {
        self.url = url
        self.options = options
        self.eventLoop = eventLoop
    }

    deinit {
        self.channel?.close(promise: nil)
    }

    /// The channel of the current dial, for diagnostics and tests.
    public var currentChannel: Channel? { self.channel }

    /// Starts a dial to `url` (or the previous URL). Returns at once; the outcome arrives as
    /// `transportDidOpen` or `didFail`. Throws if a dial is under way, the connection is
    /// open, or the framing options are invalid.
    public func connect(to url: TCPURL? = nil) throws(WebSocketUsageError) {
        self.eventLoop.preconditionInEventLoop()
        guard self.state == .idle || self.state == .closed else {
            throw WebSocketUsageError("cannot connect: the connection is \(self.state.rawValue)")
        }
        try self.options.framing.validate()
        if let url { self.url = url }
        self.generation += 1
        let generation = self.generation
        self.state = .connecting
        self.pinVerifier = nil
        self.verifyReport = nil
        self.proxy = nil
        self.dialTimer.start(hostIsIPAddress: self.url.hostIsIPAddress)

        let timeout = self.options.connectTimeout
        self.connectTimer = RuntimeClock.of(self.eventLoop).scheduleTask(on: self.eventLoop, in: timeout) {
            self.dialFailed(generation, DialError.timedOut(hostPort: self.url.hostPort, timeout: timeout, proxy: self.proxy))
        }
        let proxy: ProxySettings?
        do {
            proxy = try self.options.proxy.resolve(for: .tcp(self.url))
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
                guard generation == self.generation, self.state == .connecting else {
                    channel.close(promise: nil)
                    return
                }
                if !self.url.secure { self.opened(generation) }
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
            // The connection opens when the TLS handshake is done, not when TCP is.
            try pipeline.addHandler(TLSHandshakeWatcher { [weak self] result in
                guard let self else { return }
                switch result {
                case .success: self.opened(generation)
                case .failure(let error): self.dialFailed(generation, self.classify(error))
                }
            })
        }
        try pipeline.addHandler(self.dialTimer.handler(secure: self.url.secure))
        let framed = FramedChannelHandler(framing: self.options.framing, closeTimeout: self.options.closeTimeout, owner: self)
        try pipeline.addHandler(framed)
        self.handler = framed
    }

    private func opened(_ generation: Int) {
        guard generation == self.generation, self.state == .connecting else { return }
        self.connectTimer?.cancel()
        self.connectTimer = nil
        self.state = .open
        let timing = self.dialTimer.finish(secure: self.url.secure, handshake: false)
        self.delegate?.transportDidOpen(self, info: WebSocketOpenInfo(subprotocol: nil, headers: [:], compression: nil, timing: timing))
    }

    private func dialFailed(_ generation: Int, _ error: WebSocketConnectionError) {
        guard generation == self.generation, self.state == .connecting else { return }
        self.state = .closed
        self.connectTimer?.cancel()
        self.connectTimer = nil
        self.handler?.detach()
        self.channel?.close(promise: nil)
        self.channel = nil
        self.handler = nil
        self.delegate?.transport(self, didFail: error)
    }

    private func classify(_ error: Error) -> WebSocketConnectionError {
        DialError.classify(
            error,
            hostPort: self.url.hostPort,
            timeout: self.options.connectTimeout,
            pinMismatch: self.pinVerifier?.mismatch,
            pins: self.options.tls.pinList,
            verify: self.verifyReport,
            proxy: self.proxy
        )
    }

    // MARK: Using an open connection

    /// Sends one message, framed by the connection's framing. Throws when the connection is
    /// not open or the framing cannot carry the message (wrong fixed size, delimiter inside).
    public func send(_ data: ByteBuffer) throws(WebSocketUsageError) {
        guard self.state == .open, let handler = self.handler else { throw WebSocketUsageError("connection is not open") }
        try handler.send(data)
        self.stats.messagesSent += 1
        self.stats.bytesSent += data.readableBytes
    }

    /// Ends the connection with code 1000; see ``close(code:reason:)``.
    public func close() {
        self.endConnection(code: WebSocketCloseCode.normal, reason: "")
    }

    /// Ends the connection: pending writes go out, then FIN. The close is reported with
    /// `code` and `reason` (which do not go on the wire), clean, by local. A dial in progress
    /// is abandoned without an event. Never throws; the signature is ``Transport``'s.
    public func close(code: UInt16, reason: String) throws(WebSocketUsageError) {
        self.endConnection(code: code, reason: reason)
    }

    private func endConnection(code: UInt16, reason: String) {
        switch self.state {
        case .connecting:
            self.abandonDial()
        case .open:
            self.state = .closing
            self.handler?.close(code: code, reason: reason)
        case .idle, .closing, .closed:
            break
        }
    }

    /// Drops the connection now, without waiting for pending writes; an open connection
    /// reports 1006 by network.
    public func abort() {
        switch self.state {
        case .connecting:
            self.abandonDial()
        case .open, .closing:
            self.handler?.abort(reset: false)
        case .idle, .closed:
            break
        }
    }

    private func abandonDial() {
        self.generation += 1
        self.state = .closed
        self.connectTimer?.cancel()
        self.handler?.detach()
        self.channel?.close(promise: nil)
        self.channel = nil
        self.handler = nil
    }
}

extension TCPConnection: FramedChannelOwner {
    func framedChannelReceived(_ message: ByteBuffer) {
        guard self.state == .open || self.state == .closing else { return }
        self.stats.messagesReceived += 1
        self.stats.bytesReceived += message.readableBytes
        self.delegate?.transport(self, didReceive: message, kind: .binary)
    }

    func framedChannelFailed(_ error: TCPFramingError) {
        guard self.state == .open || self.state == .closing else { return }
        self.state = .closing
        self.delegate?.transport(self, didFail: WebSocketConnectionError(
            step: .protocol,
            message: "\(error.message) (closed with \(error.closeCode))",
            closeCode: error.closeCode
        ))
    }

    func framedChannelClosed(_ info: WebSocketCloseInfo) {
        // Only the open connection's handler is still attached (dials that failed or were
        // abandoned detach theirs; a TLS handshake cut short is reported by the watcher).
        guard self.state == .open || self.state == .closing else { return }
        self.handler = nil
        self.channel = nil
        self.state = .closed
        self.delegate?.transport(self, didClose: info)
    }
}

extension TCPConnection: Transport {
    public var transportURL: TransportURL { .tcp(self.url) }

    public var transportDelegate: TransportDelegate? {
        get { self.delegate }
        set { self.delegate = newValue }
    }

    public var supportsPing: Bool { false }

    public func dial(_ url: TransportURL?) throws(WebSocketUsageError) {
        switch url {
        case nil: try self.connect()
        case .tcp(let url)?: try self.connect(to: url)
        case .webSocket(let url)?: throw WebSocketUsageError("a TCP connection cannot dial \(url)")
        }
    }

    /// Sends one message; TCP has no message kinds, so `kind` is ignored.
    public func send(_ data: ByteBuffer, kind: WebSocketMessageKind) throws(WebSocketUsageError) {
        try self.send(data)
    }

    public func ping(_ payload: ByteBuffer) throws(WebSocketUsageError) {
        throw WebSocketUsageError("TCP has no ping; use a heartbeat message")
    }
}
