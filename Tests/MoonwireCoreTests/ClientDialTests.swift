import NIOCore
import NIOPosix
import Testing

@testable import MoonwireCore

/// The one dial of ``ClientConnection`` for every scheme, over real loopback sockets:
/// each kind opens with its timing, names the step a dial failed in, and dials again on
/// the same object after a failure or an abandoned dial.
@Suite(.timeLimit(.minutes(5))) struct ClientDialTests {
    enum Event: Sendable {
        case open(ConnectTiming?)
        case fail(ConnectionError)
        case close(UInt16)
    }

    /// Dials `urls` one after the other on one connection: the next when the one before
    /// failed or closed; an open is closed at once. Returns every event.
    final class Redialer: ClientConnectionDelegate {
        var events: [Event] = []
        var next: [TransportURL]
        let done: EventLoopPromise<[Event]>

        init(next: [TransportURL], done: EventLoopPromise<[Event]>) {
            self.next = next
            self.done = done
        }

        func connectionDidOpen(_ connection: ClientConnection, info: ConnectionOpenInfo) {
            self.events.append(.open(info.timing))
            try? connection.close()
        }
        func session(_ connection: ClientConnection, didReceive message: ByteBuffer, kind: MessageKind) {}
        func session(_ connection: ClientConnection, didFail error: ConnectionError) {
            self.events.append(.fail(error))
            if connection.state == .closed { self.ended(connection) }
        }
        func session(_ connection: ClientConnection, didClose info: CloseInfo) {
            self.events.append(.close(info.code))
            self.ended(connection)
        }

        private func ended(_ connection: ClientConnection) {
            guard !self.next.isEmpty else {
                // Late events of a dial that is over (there must be none) show up first.
                connection.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(50)) { self.done.succeed(self.events) }
                return
            }
            do {
                try connection.connect(to: self.next.removeFirst())
            } catch {
                self.done.fail(error)
            }
        }
    }

    static func dial(
        _ urls: [String], tls: TLSOptions = TLSOptions(), timeout: TimeAmount = .seconds(5), abandonFirst: Bool = false
    ) async throws -> [Event] {
        let loop = TestClient.group.next()
        let done = loop.makePromise(of: [Event].self)
        let parsed = try urls.map { try TransportURL($0) }
        try await loop.submit {
            var webSocket = WebSocketClientOptions(dial: DialOptions(connectTimeout: timeout, tls: tls))
            webSocket.proxy = .direct
            var tcp = TCPClientOptions(framing: .line(), dial: DialOptions(connectTimeout: timeout, tls: tls))
            tcp.proxy = .direct
            let connection = ClientConnection(url: parsed[0], webSocket: webSocket, tcp: tcp, eventLoop: loop)
            let redialer = Redialer(next: Array(parsed.dropFirst()), done: done)
            connection.delegate = redialer
            done.futureResult.whenComplete { _ in withExtendedLifetime((connection, redialer)) {} }
            let timer = loop.scheduleTask(in: .seconds(20)) { done.fail(PeerError(message: "dial test timed out: \(redialer.events)")) }
            done.futureResult.whenComplete { _ in timer.cancel() }
            try connection.connect()
            if abandonFirst {
                // Given up while DNS/TCP is under way: no event, and the next dial is not disturbed.
                try connection.close()
                try connection.connect()
            }
        }.get()
        return try await done.futureResult.get()
    }

    /// A server for `scheme` (TLS with the test certificate), and the client TLS that trusts it.
    static func server(_ scheme: String) async throws -> (TestServer, TLSOptions) {
        let secure = scheme == "wss" || scheme == "tls"
        var options = MessageServerOptions(framing: .line())
        var client = TLSOptions()
        if secure {
            let files = try TLSFixture.files.get()
            options.tls = TLSOptions(certificateFile: files.cert, privateKeyFile: files.key)
            client = TLSOptions(caFile: files.ca)
        }
        let server = try await TestServer.start(scheme.hasPrefix("w") ? "\(scheme)://127.0.0.1:0/" : "\(scheme)://127.0.0.1:0", options: options)
        return (server, client)
    }

    static func url(_ scheme: String, port: Int) -> String {
        scheme.hasPrefix("w") ? "\(scheme)://127.0.0.1:\(port)/" : "\(scheme)://127.0.0.1:\(port)"
    }

    /// The failure when it is the only event.
    static func onlyFailure(_ events: [Event]) -> ConnectionError? {
        guard events.count == 1, case .fail(let error) = events[0] else { return nil }
        return error
    }

    @Test(arguments: ["ws", "tcp"])
    func refusedPortIsAConnectError(scheme: String) async throws {
        let port = try closedPort()
        let events = try await Self.dial([Self.url(scheme, port: port)])
        let error = try #require(Self.onlyFailure(events), "\(scheme): \(events)")
        #expect(error.step == .connect)
        #expect(error.message == "connection refused (127.0.0.1:\(port))")
    }

    @Test(arguments: ["wss", "tls"])
    func tlsToAPlainPortIsATLSError(scheme: String) async throws {
        let peer = try await PlainPeer.start(reply: "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        let events = try await Self.dial([Self.url(scheme, port: peer.port)])
        try await peer.stop()
        let error = try #require(Self.onlyFailure(events), "\(scheme): \(events)")
        #expect(error.step == .tls)
        #expect(error.message == "wrong version number for host 127.0.0.1")
    }

    @Test(arguments: ["ws", "wss", "tls"])
    func silentPeerTimesOut(scheme: String) async throws {
        let peer = try await PlainPeer.start(reply: nil)
        let events = try await Self.dial([Self.url(scheme, port: peer.port)], timeout: .milliseconds(300))
        try await peer.stop()
        let error = try #require(Self.onlyFailure(events), "\(scheme): \(events)")
        #expect(error.step == .timeout)
        #expect(error.message == "no connection to 127.0.0.1:\(peer.port) within 0.3 s")
    }

    @Test(arguments: ["ws", "wss", "tcp", "tls"])
    func failedDialThenOpenWithTimingOnTheSameConnection(scheme: String) async throws {
        let (server, tls) = try await Self.server(scheme)
        let refused = try closedPort()
        let events = try await Self.dial([Self.url(scheme, port: refused), Self.url(scheme, port: server.port)], tls: tls)
        try await server.stop()
        guard events.count == 3, case .fail(let error) = events[0], case .open(let timing?) = events[1], case .close(1000) = events[2] else {
            Issue.record("\(scheme): \(events)")
            return
        }
        #expect(error.step == .connect)
        let secure = scheme == "wss" || scheme == "tls"
        let webSocket = scheme.hasPrefix("w")
        #expect((timing.tls != nil) == secure, "\(timing)")
        #expect((timing.handshake != nil) == webSocket, "\(timing)")
        #expect(timing.dns + timing.tcp + (timing.tls ?? .zero) + (timing.handshake ?? .zero) == timing.total, "\(timing)")
    }

    @Test(arguments: ["ws", "wss", "tcp", "tls"])
    func abandonedDialLeavesTheNextAlone(scheme: String) async throws {
        let (server, tls) = try await Self.server(scheme)
        let events = try await Self.dial([Self.url(scheme, port: server.port)], tls: tls, abandonFirst: true)
        try await server.stop()
        guard events.count == 2, case .open(_?) = events[0], case .close(1000) = events[1] else {
            Issue.record("\(scheme): \(events)")
            return
        }
    }
}

/// A TCP listener on 127.0.0.1 that speaks no TLS and no WebSocket: it answers the first
/// bytes it reads with `reply` and closes, or with nil never says anything.
final class PlainPeer: Sendable {
    private let channel: Channel
    let port: Int

    private init(channel: Channel) {
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
    }

    static func start(reply: String?) async throws -> PlainPeer {
        let channel = try await ServerBootstrap(group: TestClient.group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Replier(reply: reply)) }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return PlainPeer(channel: channel)
    }

    func stop() async throws {
        try await self.channel.close()
    }

    private final class Replier: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        private var reply: String?

        init(reply: String?) { self.reply = reply }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard let reply = self.reply.take() else { return }
            context.writeAndFlush(self.wrapOutboundOut(ByteBuffer(string: reply))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        }
    }
}
