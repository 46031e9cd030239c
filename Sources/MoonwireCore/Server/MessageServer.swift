import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A WebSocket (`ws://`, `wss://`) or TCP (`tcp://`, `tls://`) server on one event loop:
/// the object behind `mw.listen`, for mock peers and prototypes.
///
/// The listening socket is bound when the server is created, so ``url`` tells the real
/// port at once (port 0 picks a free one) and a bind error is thrown right there. The
/// server, its peers and its delegate all live on ``eventLoop``: create and use them there.
/// A listening server keeps itself alive until ``close()``.
///
/// ```swift
/// loop.execute {
///     let server = try! MessageServer(url: ServerURL("ws://127.0.0.1:0/chat"), eventLoop: loop)
///     server.delegate = chat
///     print(server.url)                                   // ws://127.0.0.1:39127/chat
///     _ = try? server.broadcast(ByteBuffer(string: "hi all"), kind: .text)
///     server.rejectNext(2, status: 503)                   // the next two handshakes get 503
///     server.close()                                      // peers get 1001
/// }
/// ```
public final class MessageServer {
    /// The loop of the server and all its peers.
    public let eventLoop: EventLoop
    /// The settings.
    public let options: MessageServerOptions
    /// The URL the server listens on, with the bound port.
    public private(set) var url: ServerURL
    /// Receives the events; held strongly (a message reaches it without a weak load) until
    /// the server has closed and every peer's close was reported (``closeFuture``): then
    /// the link is cut, as nothing more is reported.
    public var delegate: (any MessageServerDelegate)?
    /// True until ``close()``.
    public private(set) var isListening = true
    /// The process-wide budget (of this loop) every peer's budget charges, if any: set it
    /// before peers connect (peers made before keep none).
    public var sendBudget: SendBudgetPool?

    private var peersByID: [Int: ServerPeer] = [:]
    /// ``peers``, kept between a peer's connect and the next connect or close, so that a
    /// broadcast round to 10 000 peers does not filter and sort them again.
    private var connectedPeers: [ServerPeer]?
    private var nextID = 1
    private var rejections: (count: Int, status: HTTPResponseStatus) = (0, .serviceUnavailable)
    private var serverChannel: Channel?
    private let sslContext: NIOSSLContext?
    private let closed: EventLoopPromise<Void>
    /// The WebSocket handshakes under way and their timeout.
    private let handshakeDeadlines: HandshakeDeadlines

    /// Binds `url` and starts accepting. Must be called on `eventLoop`.
    public init(url: ServerURL, options: MessageServerOptions = MessageServerOptions(), eventLoop: EventLoop) throws(ServerListenError) {
        eventLoop.preconditionInEventLoop()
        do {
            try options.framing.validate()
        } catch {
            throw ServerListenError(error.description)
        }
        let sslContext = url.secure ? try options.tls.makeServerContext() : nil
        let socket = try ListeningSocket.open(host: url.host, port: url.port, backlog: options.backlog)
        self.eventLoop = eventLoop
        self.options = options
        self.sslContext = sslContext
        self.url = url
        self.url.port = socket.port
        self.handshakeDeadlines = HandshakeDeadlines(timeout: options.handshakeTimeout, eventLoop: eventLoop)
        // Made last: NIO insists every promise is completed, so none may be left behind by a throw.
        self.closed = eventLoop.makePromise()

        // The bootstrap keeps the server alive while it listens: no one else has to.
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let tunesLoopback = socket.tunesLoopback
        let adopted = ServerBootstrap(group: eventLoop, childGroup: eventLoop)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptBackoff { event in
                        let server = bound.value
                        server.delegate?.server(server, accepting: event)
                    })
                }
            }
            // Accepts per wake-up: NIO's default of 4 takes a reconnect storm's thousands of
            // queued connections a few at a time, between every other read on the loop.
            .serverChannelOption(.maxMessagesPerRead, value: ChannelTuning.acceptsPerEvent)
            // No child channel options: NIO applies those one future at a time for every
            // accepted channel. TCP_NODELAY (and on loopback the send buffer) come from
            // the listening socket; the rest is set here, directly.
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let options = channel.syncOptions {
                        try options.setOption(.maxMessagesPerRead, value: ChannelTuning.readsPerEvent)
                        try options.setOption(.recvAllocator, value: ChannelTuning.readAllocator)
                    }
                    if !tunesLoopback { ChannelTuning.tuneLoopback(channel) }
                    try ClockProbe.attach(to: channel)
                    try bound.value.configure(channel)
                }
            }
            .withBoundSocket(socket.handle)
        // NIO has made its channel, and listened again with a queue of 128, before it returned.
        ListeningSocket.restoreBacklog(socket.handle, socket.backlog)
        adopted
            .assumeIsolated()
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    self.serverChannel = channel
                    if !self.isListening { channel.close(promise: nil) }
                case .failure(let error):
                    self.isListening = false
                    self.delegate?.server(self, didFail: ConnectionError(step: .connect, message: "listen: \(error)"))
                    self.finishIfClosed()
                }
            }
    }

    /// Connected peers, in the order they connected.
    public var peers: [ServerPeer] {
        if let peers = self.connectedPeers { return peers }
        let peers = self.peersByID.values.filter(\.isConnected).sorted { $0.id < $1.id }
        self.connectedPeers = peers
        return peers
    }

    /// Succeeds when the server stopped listening and every peer is gone.
    public var closeFuture: EventLoopFuture<Void> { self.closed.futureResult }

    // MARK: Server-wide operations

    /// Sends one message to every connected peer. The frame (or TCP encoding) is made once
    /// and the same buffer is written to each peer; only peers with their own compression
    /// state get their own frame. Returns how many peers took it (sent or queued). A peer
    /// whose budget cannot take it counts it in its `dropped` and, with
    /// `slowPeer == .close`, is closed with 1008 "too slow".
    @discardableResult
    public func broadcast(_ data: ByteBuffer, kind: MessageKind = .text) throws(UsageError) -> Int {
        let allocator = ByteBufferAllocator()
        let shared: ByteBuffer
        switch self.url.kind {
        case .webSocket:
            var framer = WebSocketFramer(role: .server)
            shared = framer.frame(kind.opcode, payload: data, allocator: allocator)
        case .tcp:
            shared = try MessageEncoder(self.options.framing).encode(data, allocator: allocator)
        }
        var reached = 0
        for peer in self.peers where peer.isOpen {
            let offer: OutboundBuffer.Offer
            if peer.deflate != nil {
                offer = peer.offer(OutboundMessage(data, kind: kind))
            } else {
                offer = peer.offerEncoded(shared, kind: kind, payloadSize: data.readableBytes)
            }
            switch offer {
            case .sent, .queued:
                reached += 1
            case .full, .tooLarge, .dropped, .unsendable:
                // A peer that could not take it counts it (drops by overflow already are).
                if offer != .dropped { peer.outbound.countDropped(1) }
                if self.options.slowPeer == .close && offer != .unsendable { peer.closeForBeingSlow() }
            }
        }
        return reached
    }

    /// Refuses the next `count` connections: WebSocket handshakes get HTTP `status`; TCP
    /// connections are accepted and closed at once.
    public func rejectNext(_ count: Int, status: Int = 503) {
        self.rejections = (max(0, count), HTTPResponseStatus(statusCode: status))
    }

    /// Stops listening and closes every peer (WebSocket: 1001 "server shutting down").
    /// ``closeFuture`` succeeds when all are gone.
    @discardableResult
    public func close() -> EventLoopFuture<Void> {
        guard self.isListening else { return self.closed.futureResult }
        self.isListening = false
        self.serverChannel?.close(promise: nil)
        for peer in self.peersByID.values.sorted(by: { $0.id < $1.id }) {
            if peer.isConnected {
                _ = try? peer.close(code: CloseCode.goingAway, reason: "server shutting down")
            } else {
                peer.channel.close(promise: nil)
            }
        }
        self.finishIfClosed()
        return self.closed.futureResult
    }

    private func finishIfClosed() {
        if !self.isListening && self.peersByID.isEmpty {
            self.closed.succeed(())
            self.delegate = nil
        }
    }

    // MARK: Accepting

    private func configure(_ channel: Channel) throws {
        guard self.isListening else {
            channel.close(promise: nil)
            return
        }
        let pipeline = channel.pipeline.syncOperations
        if let context = self.sslContext {
            try pipeline.addHandler(NIOSSLServerHandler(context: context))
        }
        switch self.url.kind {
        case .tcp:
            if self.rejections.count > 0 {
                self.rejections.count -= 1
                channel.eventLoop.assumeIsolated().execute { channel.close(promise: nil) }
                return
            }
            let peer = self.makePeer(channel, path: "")
            try pipeline.addHandler(peer.makeTCPLink(framing: self.options.framing, closeTimeout: self.options.closeTimeout))
            if self.sslContext != nil {
                // In the peer's pipeline: gone with its channel.
                try pipeline.addHandler(TLSHandshakeWatcher { result in
                    switch result {
                    case .success: peer.connected()
                    case .failure(let error): self.incomingFailed(error)
                    }
                }, position: .after(try pipeline.handler(type: NIOSSLServerHandler.self)))
            }
        case .webSocket:
            try pipeline.addHandler(WebSocketServerHandshake(
                server: self, deadlines: self.handshakeDeadlines,
                maxHeaders: self.options.maxHeaders, maxHeaderBytes: self.options.maxHeaderBytes))
        }
    }

    private func incomingFailed(_ error: Error) {
        let message = (error as? ConnectionError)?.message ?? DialError.describe(tls: error)
        self.delegate?.server(self, didFail: ConnectionError(step: .tls, message: message))
    }

    private func makePeer(_ channel: Channel, path: String) -> ServerPeer {
        let address = channel.remoteAddress.map(DialError.describe) ?? "unknown"
        let request = ServerPeerRequest(path: path, headers: [:], subprotocol: nil, remoteAddress: address)
        let peer = ServerPeer(id: self.nextID, channel: channel, request: request, server: self)
        self.nextID += 1
        self.peersByID[peer.id] = peer
        return peer
    }
}

extension MessageServer: WebSocketUpgradeDelegate {
    /// The upgrade decision for a request RFC 6455 allows: refusals, the path, the
    /// subprotocol and compression.
    func decide(_ request: UpgradeRequest) -> WebSocketServerHandshake.Decision {
        guard self.isListening else {
            return .refuse(.serviceUnavailable, "the server is shutting down")
        }
        if self.rejections.count > 0 {
            self.rejections.count -= 1
            return .refuse(self.rejections.status, "refused by the server (reject_next)")
        }
        if let path = self.url.path {
            let requested = request.target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            guard requested == path else {
                return .refuse(.notFound, "no WebSocket endpoint at this path")
            }
        }
        var chosen: String?
        if !self.options.protocols.isEmpty {
            let offered = request.headers[canonicalForm: "sec-websocket-protocol"]
            chosen = offered.first { self.options.protocols.contains(String($0)) }.map(String.init)
        }
        let deflate = self.options.compress ? PerMessageDeflate.serverAccept(request.headers) : nil
        return .accept(subprotocol: chosen, deflate: deflate)
    }

    /// After the 101 went out: the peer, its handler right after the handshake's, and the
    /// delegate told.
    func upgraded(_ channel: Channel, request: UpgradeRequest, subprotocol: String?, deflate: PerMessageDeflate?, after handshake: WebSocketServerHandshake) throws {
        let peer = self.makePeer(channel, path: request.target)
        let handler = peer.makeWebSocketLink(maxMessage: self.options.maxMessage, deflate: deflate, closeTimeout: self.options.closeTimeout)
        try channel.pipeline.syncOperations.addHandler(handler, position: .after(handshake))
        peer.connected(subprotocol: subprotocol, headers: request.headers)
    }
}

extension MessageServer {
    // MARK: Peer events

    func peerBecameActive(_ peer: ServerPeer) {
        if self.sslContext == nil { peer.connected() }
    }

    func peerConnected(_ peer: ServerPeer, request: ServerPeerRequest) {
        self.connectedPeers = nil
        self.delegate?.server(self, didConnect: peer, request: request)
    }

    func peer(_ peer: ServerPeer, didReceive message: ByteBuffer, kind: MessageKind) {
        self.delegate?.session(peer, didReceive: message, kind: kind)
    }

    func peerDrained(_ peer: ServerPeer) {
        self.delegate?.server(self, peerDidDrain: peer)
    }

    func peerReachedBudget(_ peer: ServerPeer) {
        self.delegate?.server(self, peerReachedBudget: peer)
    }

    func peer(_ peer: ServerPeer, didFail error: ConnectionError) {
        self.delegate?.session(peer, didFail: error)
    }

    func peer(_ peer: ServerPeer, didClose info: CloseInfo, wasConnected: Bool) {
        self.peersByID[peer.id] = nil
        if wasConnected {
            self.connectedPeers = nil
            self.delegate?.session(peer, didClose: info)
        }
        self.finishIfClosed()
    }
}
