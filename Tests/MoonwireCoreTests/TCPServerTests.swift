import Foundation
import NIOCore
import Testing

@testable import MoonwireCore

@Suite("TCP server and client over loopback", .serialized, .timeLimit(.minutes(5)))
struct TCPServerTests {
    static let modes: [(String, TCPFraming)] = [
        ("line", .line()),
        ("delimiter", .delimiter(Array("\r\n".utf8))),
        ("fixed", .fixed(7)),
        ("length 2 big", .length(LengthPrefix(bytes: 2))),
        ("length 4 little adjusted", .length(LengthPrefix(bytes: 4, endian: .little, adjust: -4))),
        ("length 8", .length(LengthPrefix(bytes: 8))),
    ]

    @Test("split and glued writes arrive as exactly the messages sent", arguments: 0..<modes.count)
    func stickyPackets(_ index: Int) async throws {
        let framing = Self.modes[index].1
        let server = try await TestServer.start("tcp://127.0.0.1:0", options: MessageServerOptions(framing: framing))
        // The seed's messages, padded to 7 bytes for fixed framing.
        let messages = ["abc", "da", "bcdabcd", "abcd", "x"].map { m -> String in
            if let n = (framing.mode as? FixedFraming)?.size { return m.padding(toLength: n, withPad: ".", startingAt: 0) }
            return m
        }
        let encoder = MessageEncoder(framing)
        let wire = try messages.flatMap { Array(try encoder.encode(ByteBuffer(string: $0)).readableBytesView) }
        let socket = try RawSocket(port: server.port)
        socket.write(wire, in: 1)          // every byte boundary
        socket.write(wire, in: 5)          // splits inside headers and messages
        socket.write(wire + wire + wire)   // one burst of glued messages
        let expected = Array(repeating: messages, count: 5).flatMap { $0 }
        try await server.wait("\(expected.count) messages") { $0.messages.count >= expected.count }
        #expect(try await server.onLoop { server.messages.map(\.text) } == expected)
        try await server.stop()
    }

    @Test func lengthHeaderAboveMaxClosesTheConnectionWithAClearError() async throws {
        let options = MessageServerOptions(framing: .length(LengthPrefix(bytes: 4, max: 1024)))
        let server = try await TestServer.start("tcp://127.0.0.1:0", options: options)
        let socket = try RawSocket(port: server.port)
        socket.write([0x7F, 0xFF, 0xFF, 0xFF])
        #expect(socket.readToEnd().eof)
        try await server.wait("the close") { $0.closes.count == 1 }
        let (failure, close) = try await server.onLoop { (server.failures.first?.error, server.closes[0].info) }
        #expect(failure?.step == .protocol)
        #expect(failure?.closeCode == 1009)
        #expect(failure?.message.contains("2147483647") == true)
        #expect(close.code == 1009 && close.initiator == .local)
        try await server.stop()
    }

    @Test func clientAndServerExchangeFramedMessages() async throws {
        let framing = TCPFraming.length(LengthPrefix(bytes: 2, endian: .big))
        let server = try await TestServer.start("tcp://127.0.0.1:0", options: MessageServerOptions(framing: framing), echo: true)
        let client = try await TCPTestClient.run("tcp://127.0.0.1:\(server.port)", framing: framing) { connection, received in
            if received.isEmpty {
                try? connection.send(ByteBuffer(string: "one"), kind: .binary)
                try? connection.send(ByteBuffer(string: ""), kind: .binary)
                try? connection.send(ByteBuffer(string: String(repeating: "z", count: 5000)), kind: .binary)
            } else if received.count == 3 {
                try? connection.close()
            }
        }
        #expect(client.messages == ["one", "", String(repeating: "z", count: 5000)])
        #expect(client.close?.code == 1000 && client.close?.initiator == .local && client.close?.clean == true)
        try await server.wait("the peer's close") { $0.closes.count == 1 }
        let serverClose = try await server.onLoop { server.closes[0].info }
        #expect(serverClose.code == 1000 && serverClose.initiator == .peer)
        try await server.stop()
    }

    @Test func tlsClientAndServer() async throws {
        let files = try TLSFixture.files.get()
        var options = MessageServerOptions(framing: .line())
        options.tls = TLSOptions(certificateFile: files.cert, privateKeyFile: files.key)
        let server = try await TestServer.start("tls://127.0.0.1:0", options: options, echo: true)
        let client = try await TCPTestClient.run("tls://127.0.0.1:\(server.port)", framing: .line(), tls: TLSOptions(caFile: files.ca)) { connection, received in
            if received.isEmpty { try? connection.send(ByteBuffer(string: "secret"), kind: .binary) } else { try? connection.close() }
        }
        #expect(client.messages == ["secret"])
        // Untrusted server: a tls dial error.
        let refused = try await TCPTestClient.run("tls://127.0.0.1:\(server.port)", framing: .line()) { _, _ in }
        #expect(refused.failure?.step == .tls)
        try await server.stop()
    }

    @Test func dialErrorsNameTheStep() async throws {
        let refused = try await TCPTestClient.run("tcp://127.0.0.1:1", framing: .line()) { _, _ in }
        #expect(refused.failure?.step == .connect)
        let unresolved = try await TCPTestClient.run("tcp://no-such-host.invalid:7000", framing: .line()) { _, _ in }
        #expect(unresolved.failure?.step == .dns)
    }

    @Test func rejectNextAcceptsThenClosesAtOnce() async throws {
        let server = try await TestServer.start("tcp://127.0.0.1:0")
        try await server.onLoop { server.server.rejectNext(1) }
        let rejected = try RawSocket(port: server.port)
        #expect(rejected.readToEnd().eof)
        let accepted = try RawSocket(port: server.port)
        accepted.write(Array("hi\n".utf8))
        try await server.wait("the message") { $0.messages.count == 1 }
        #expect(try await server.onLoop { server.connected.map(\.id) } == [1])
        withExtendedLifetime(accepted) {}
        try await server.stop()
    }

    @Test func heartbeatDropsTheSilentPeerAndKeepsTheOthers() async throws {
        var options = MessageServerOptions()
        options.heartbeat = .dropSilentPeers(after: .milliseconds(1500))
        let server = try await TestServer.start("tcp://127.0.0.1:0", options: options)
        let silent = try RawSocket(port: server.port)
        let chatty = try RawSocket(port: server.port)
        try await server.wait("two peers") { $0.connected.count == 2 }
        // The chatty peer writes until the silent one is dropped, from a thread of its
        // own: on a loaded machine the test process's cooperative pool (2 threads here,
        // shared by the tests running in parallel) can stall a Task for longer than the
        // timeout, and the chatty peer would be dropped too.
        let writer = ChattyWriter(chatty, Array("ping\n".utf8))
        try await server.wait("the silent peer's drop", timeout: 15) { $0.closes.count >= 1 }
        writer.stop()
        let closes = try await server.onLoop { server.closes }
        #expect(closes.count == 1)
        #expect(closes[0].id == 1 && closes[0].info.code == 1006 && closes[0].info.reason == "heartbeat timeout")
        #expect(try await server.onLoop { server.server.peers.map(\.id) } == [2])
        withExtendedLifetime(silent) {}
        try await server.stop()
    }

    @Test func broadcastReachesEveryPeerWithOneEncoding() async throws {
        let server = try await TestServer.start("tcp://127.0.0.1:0")
        let sockets = try (0..<4).map { _ in try RawSocket(port: server.port) }
        try await server.wait("four peers") { $0.connected.count == 4 }
        let reached = try await server.onLoop { try server.server.broadcast(ByteBuffer(string: "news")) }
        #expect(reached == 4)
        try await server.stop()
        for socket in sockets {
            #expect(socket.readToEnd().bytes == Array("news\n".utf8))
        }
    }
}

/// A TCP client for tests: records messages and the outcome; `step` runs on open (with no
/// messages yet) and after each message.
final class TCPTestClient: ClientConnectionDelegate, @unchecked Sendable {
    struct Outcome: Sendable {
        var messages: [String] = []
        var failure: ConnectionError?
        var close: CloseInfo?
    }

    private var outcome = Outcome()
    private let step: (ClientConnection, [String]) -> Void
    private let done: EventLoopPromise<Outcome>

    private init(step: @escaping (ClientConnection, [String]) -> Void, done: EventLoopPromise<Outcome>) {
        self.step = step
        self.done = done
    }

    static func run(
        _ url: String,
        framing: TCPFraming,
        tls: TLSOptions = TLSOptions(),
        step: @escaping @Sendable (ClientConnection, [String]) -> Void
    ) async throws -> Outcome {
        let loop = TestClient.group.next()
        let done = loop.makePromise(of: Outcome.self)
        let parsed = try TCPURL(url)
        try await loop.submit {
            let delegate = TCPTestClient(step: step, done: done)
            let connection = ClientConnection(url: parsed, options: TCPClientOptions(framing: framing, dial: DialOptions(connectTimeout: .seconds(3), tls: tls)), eventLoop: loop)
            connection.delegate = delegate
            done.futureResult.whenComplete { _ in withExtendedLifetime((delegate, connection)) {} }
            let timer = loop.scheduleTask(in: .seconds(10)) { done.fail(PeerError(message: "TCP test client timed out")) }
            done.futureResult.whenComplete { _ in timer.cancel() }
            try connection.connect()
        }.get()
        return try await done.futureResult.get()
    }

    func connectionDidOpen(_ connection: ClientConnection, info: ConnectionOpenInfo) {
        self.step(connection, self.outcome.messages)
    }

    func session(_ connection: ClientConnection, didReceive message: ByteBuffer, kind: MessageKind) {
        self.outcome.messages.append(String(buffer: message))
        self.step(connection, self.outcome.messages)
    }

    func session(_ connection: ClientConnection, didFail error: ConnectionError) {
        self.outcome.failure = error
        if connection.state == .closed { self.done.succeed(self.outcome) }
    }

    func session(_ connection: ClientConnection, didClose info: CloseInfo) {
        self.outcome.close = info
        self.done.succeed(self.outcome)
    }
}
