import NIOCore
import Testing

@testable import MoonwireCore

/// The steps of a dial (DNS, TCP, TLS, the WebSocket upgrade), timed over real
/// loopback sockets for every scheme.
@Suite(.timeLimit(.minutes(5))) struct ConnectTimingTests {
    /// Hands over the open's timing, then closes.
    final class Opener: ClientConnectionDelegate {
        let opened: EventLoopPromise<ConnectTiming?>

        init(_ opened: EventLoopPromise<ConnectTiming?>) { self.opened = opened }

        func connectionDidOpen(_ connection: ClientConnection, info: ConnectionOpenInfo) {
            opened.succeed(info.timing)
            try? connection.close()
        }
        func session(_ connection: ClientConnection, didReceive message: ByteBuffer, kind: MessageKind) {}
        func session(_ connection: ClientConnection, didFail error: ConnectionError) {
            opened.fail(PeerError(message: "dial failed: \(error)"))
        }
        func session(_ connection: ClientConnection, didClose info: CloseInfo) {}
    }

    /// Dials `url` and returns the timing its open reported.
    static func dial(_ url: String, tls: TLSOptions = TLSOptions()) async throws -> ConnectTiming {
        let loop = TestClient.group.next()
        let opened = loop.makePromise(of: ConnectTiming?.self)
        let parsed = try TransportURL(url)
        try await loop.submit {
            var webSocket = WebSocketClientOptions()
            webSocket.tls = tls
            let connection = ClientConnection(url: parsed, webSocket: webSocket, tcp: TCPClientOptions(framing: .line(), dial: DialOptions(tls: tls)), eventLoop: loop)
            let opener = Opener(opened)
            connection.delegate = opener
            opened.futureResult.whenComplete { _ in withExtendedLifetime((connection, opener)) {} }
            try connection.connect()
        }.get()
        return try #require(try await opened.futureResult.get())
    }

    static func expectSteps(_ t: ConnectTiming, tls: Bool, handshake: Bool) {
        #expect(t.dns + t.tcp + (t.tls ?? .zero) + (t.handshake ?? .zero) == t.total, "\(t)")
        #expect((t.tls != nil) == tls, "\(t)")
        #expect((t.handshake != nil) == handshake, "\(t)")
        #expect(t.tcp > .zero, "\(t)")
        if let step = t.tls { #expect(step > .zero, "\(t)") }
        if let step = t.handshake { #expect(step > .zero, "\(t)") }
    }

    @Test func webSocketToAnIPAddressHasNoDNSStep() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0/")
        let t = try await Self.dial("ws://127.0.0.1:\(server.port)/")
        #expect(t.dns == .zero)
        Self.expectSteps(t, tls: false, handshake: true)
        try await server.stop()
    }

    @Test func webSocketToAHostNameResolvesIt() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0/")
        let t = try await Self.dial("ws://localhost:\(server.port)/")
        #expect(t.dns > .zero, "\(t)")
        Self.expectSteps(t, tls: false, handshake: true)
        try await server.stop()
    }

    @Test func secureWebSocketTimesTLSApart() async throws {
        let files = try TLSFixture.files.get()
        let server = try await TestServer.start(
            "wss://127.0.0.1:0/", options: MessageServerOptions(tls: TLSOptions(certificateFile: files.cert, privateKeyFile: files.key))
        )
        let t = try await Self.dial("wss://localhost:\(server.port)/", tls: TLSOptions(caFile: files.ca))
        #expect(t.dns > .zero, "\(t)")
        Self.expectSteps(t, tls: true, handshake: true)
        try await server.stop()
    }

    @Test func tcpHasNeitherTLSNorHandshake() async throws {
        let server = try await TestServer.start("tcp://127.0.0.1:0")
        let t = try await Self.dial("tcp://127.0.0.1:\(server.port)")
        #expect(t.dns == .zero)
        Self.expectSteps(t, tls: false, handshake: false)
        try await server.stop()
    }

    @Test func tlsOverTCPTimesTLS() async throws {
        let files = try TLSFixture.files.get()
        var options = MessageServerOptions()
        options.tls = TLSOptions(certificateFile: files.cert, privateKeyFile: files.key)
        let server = try await TestServer.start("tls://127.0.0.1:0", options: options)
        let t = try await Self.dial("tls://127.0.0.1:\(server.port)", tls: TLSOptions(caFile: files.ca))
        #expect(t.dns == .zero)
        Self.expectSteps(t, tls: true, handshake: false)
        try await server.stop()
    }
}
