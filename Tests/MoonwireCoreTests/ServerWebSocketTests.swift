import Foundation
import NIOCore
import Testing

@testable import MoonwireCore

@Suite("WebSocket server against our client and node-ws", .serialized, .timeLimit(.minutes(5)))
struct ServerWebSocketTests {
    /// A client that offers permessage-deflate.
    static let compressing = {
        var options = WebSocketClientOptions()
        options.compress = true
        return options
    }()

    @Test func echoesToOurClientWithSubprotocolPathAndHeaders() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0/chat", options: MessageServerOptions(protocols: ["v1", "v2"]), echo: true)
        var options = WebSocketClientOptions()
        options.protocols = ["v2", "v1"]
        options.headers = [("X-Token", "t0k3n")]
        let events = try await TestClient.run(
            "ws://127.0.0.1:\(server.port)/chat?room=1",
            options: options,
            script: ClientScript(
                onOpen: { c, _ in
                    try? c.send(.text("héllo"), kind: .text)
                    try? c.send(ByteBuffer(bytes: [0, 255]), kind: .binary)
                },
                onMessage: { c, _, kind in if kind == .binary { try? c.close(code: 1000, reason: "bye") } }
            )
        )
        #expect(events.first == .open(subprotocol: "v2", compressed: false))
        #expect(events.dropFirst().prefix(2) == [.message(Array("héllo".utf8), .text), .message([0, 255], .binary)])
        #expect(events.last == .close(CloseInfo(code: 1000, reason: "bye", clean: true, initiator: .local)))
        try await server.wait("the close") { $0.closes.count == 1 }
        let (request, close) = try await server.onLoop { (server.connected[0].request, server.closes[0].info) }
        #expect(request.path == "/chat?room=1")
        #expect(request.headers["X-Token"] == ["t0k3n"])
        #expect(request.subprotocol == "v2")
        #expect(close == CloseInfo(code: 1000, reason: "bye", clean: true, initiator: .peer))
        try await server.stop()
    }

    @Test func otherPathsGet404AndRejectNextRefusesHandshakes() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0/chat", echo: true)
        let wrongPath = try await TestClient.run("ws://127.0.0.1:\(server.port)/other")
        #expect(wrongPath.count == 1)
        if case .fail(let error) = wrongPath.first { #expect(error.httpStatus == 404) } else { Issue.record("expected a failure") }
        try await server.onLoop { server.server.rejectNext(2, status: 403) }
        for _ in 0..<2 {
            let rejected = try await TestClient.run("ws://127.0.0.1:\(server.port)/chat")
            if case .fail(let error) = rejected.first {
                #expect(error.step == .handshake && error.httpStatus == 403)
            } else {
                Issue.record("expected a refused handshake, got \(rejected)")
            }
        }
        let accepted = try await TestClient.run("ws://127.0.0.1:\(server.port)/chat", script: ClientScript(onOpen: { c, _ in try? c.close() }))
        #expect(accepted.first == .open(subprotocol: nil, compressed: false))
        #expect(try await server.onLoop { server.connected.count } == 1)
        try await server.stop()
    }

    @Test func abortIsSeenByTheClientAs1006ByNetwork() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0")
        // Aborted once the client is surely open: an RST racing the 101 response would make
        // the client's kernel discard the response, and the client see a failed dial.
        try await server.onLoop { server.onMessage = { peer, _, _ in peer.abort() } }
        let events = try await TestClient.run("ws://127.0.0.1:\(server.port)/", script: ClientScript(onOpen: { c, _ in try? c.send(.text("hi"), kind: .text) }))
        #expect(events.last == .close(CloseInfo(code: 1006, reason: "", clean: false, initiator: .network)))
        try await server.stop()
    }

    static let badFrames: [(bytes: [UInt8], code: UInt16)] = [
        ([0x83, 0x00], 1002),              // unknown opcode
        ([0x81, 0x02, 0xC3, 0x28], 1007),  // invalid UTF-8
        ([0x09, 0x00], 1002),              // fragmented ping
    ]

    @Test(arguments: 0..<badFrames.count)
    func sendRawOfABadFrameMakesTheClientFail(_ index: Int) async throws {
        let (bytes, code) = Self.badFrames[index]
        let server = try await TestServer.start("ws://127.0.0.1:0")
        try await server.onLoop { server.onConnect = { peer in peer.sendRaw(ByteBuffer(bytes: bytes)) } }
        let events = try await TestClient.run("ws://127.0.0.1:\(server.port)/")
        guard case .fail(let error)? = events.dropFirst().first else {
            Issue.record("expected a protocol failure, got \(events)")
            return
        }
        #expect(error.step == .protocol && error.closeCode == code)
        #expect(events.last == .close(CloseInfo(code: code, reason: error.message.components(separatedBy: " (closed").first!, clean: false, initiator: .local)))
        try await server.wait("the client's close") { $0.closes.count == 1 }
        #expect(try await server.onLoop { server.closes[0].info.code } == code)
        try await server.stop()
    }

    @Test func unmaskedClientFramesAndOversizedMessagesAreRefused() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0", options: MessageServerOptions(maxMessage: 100, closeTimeout: .milliseconds(300)))
        let events = try await TestClient.run(
            "ws://127.0.0.1:\(server.port)/",
            script: ClientScript(onOpen: { c, _ in try? c.send(ByteBuffer(repeating: 0x61, count: 101), kind: .text) })
        )
        #expect(events.last.map { if case .close(let info) = $0 { return info.code == 1009 && info.initiator == .peer } else { return false } } == true)
        try await server.wait("the failure") { $0.failures.count == 1 && $0.closes.count == 1 }
        #expect(try await server.onLoop { server.failures[0].error.closeCode } == 1009)

        // A hand-made unmasked frame after a valid handshake.
        let socket = try RawSocket(port: server.port)
        socket.write(Array("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".utf8))
        socket.write([0x81, 0x01, 0x61])
        let reply = socket.readToEnd()
        #expect(reply.eof)
        // The close frame at the end: opcode 8, code 1002.
        let tail = Array(reply.bytes.suffix(from: reply.bytes.lastIndex(of: 0x88) ?? 0))
        #expect(tail.count >= 4 && tail[2] == 0x03 && tail[3] == 0xEA)
        try await server.stop()
    }

    static let upgradeRequest = Array("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".utf8)

    @Test func aHandshakeSlowerThanHandshakeTimeoutIsDropped() async throws {
        var options = MessageServerOptions()
        options.handshakeTimeout = .milliseconds(200)
        let server = try await TestServer.start("ws://127.0.0.1:0", options: options)
        let socket = try RawSocket(port: server.port)
        socket.write(Array(Self.upgradeRequest.prefix(20)))
        let reply = socket.readToEnd()
        #expect(reply.eof && reply.bytes.isEmpty)
        // A complete handshake in time still works.
        let events = try await TestClient.run("ws://127.0.0.1:\(server.port)/", script: ClientScript(onOpen: { c, _ in try? c.close() }))
        #expect(events.first.map { if case .open = $0 { return true } else { return false } } == true)
        try await server.stop()
    }

    @Test func maskedFramesSplitAcrossReadsAreUnmaskedAndEchoed() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0", echo: true)
        let socket = try RawSocket(port: server.port)
        socket.write(Self.upgradeRequest)
        // "hello, world" as two masked fragments with a masked ping between them, sent in
        // 3-byte pieces, then a masked close.
        func masked(_ b0: UInt8, _ payload: [UInt8]) -> [UInt8] {
            let key: [UInt8] = [0x11, 0x22, 0x33, 0x44]
            return [b0, 0x80 | UInt8(payload.count)] + key + payload.enumerated().map { $0.element ^ key[$0.offset & 3] }
        }
        let bytes = masked(0x01, Array("hello, ".utf8)) + masked(0x89, [0x70]) + masked(0x80, Array("world".utf8))
            + masked(0x88, [0x03, 0xE8])
        socket.write(bytes, in: 3)
        let reply = socket.readToEnd()
        #expect(reply.eof)
        let text = Array("hello, world".utf8)
        let echo: [UInt8] = [0x81, UInt8(text.count)] + text
        #expect(reply.bytes.firstRange(of: echo) != nil)
        #expect(reply.bytes.firstRange(of: [0x8A, 0x01, 0x70]) != nil)
        try await server.wait("the close") { $0.closes.count == 1 }
        #expect(try await server.onLoop { server.closes[0].info.code } == 1000)
        try await server.stop()
    }

    @Test func aMalformedFrameIsReportedOnceAndEndsTCP() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0")
        let socket = try RawSocket(port: server.port)
        // A 2^63 length: refused from the header, before any payload.
        socket.write(Self.upgradeRequest + [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4])
        let reply = socket.readToEnd()
        #expect(reply.eof)
        try await server.wait("the failure") { $0.failures.count == 1 && $0.closes.count == 1 }
        #expect(try await server.onLoop { server.failures.count == 1 && server.closes.count == 1 && server.closes[0].info.code == 1002 })
        try await server.stop()
    }

    @Test func pauseMakesTheClientHeartbeatFire() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0")
        try await server.onLoop { server.onConnect = { peer in peer.pause(for: .seconds(3)) } }
        let loop = TestClient.group.next()
        let done = loop.makePromise(of: ConnectionLifecycle.CloseReport.self)
        let url = try WebSocketURL("ws://127.0.0.1:\(server.port)/")
        let start = Date()
        try await loop.submit {
            var configuration = ManagedConnection.Configuration()
            configuration.reconnect = nil
            configuration.heartbeat = HeartbeatMonitor.Configuration(interval: .milliseconds(200), timeout: .milliseconds(300))
            let connection = ManagedConnection(url: .webSocket(url), configuration: configuration, eventLoop: loop)
            let watcher = CloseWatcher(done: done)
            connection.delegate = watcher
            done.futureResult.whenComplete { _ in withExtendedLifetime((watcher, connection)) {} }
            connection.start()
        }.get()
        let report = try await done.futureResult.get()
        #expect(report.code == 1006 && report.by == .network)
        // Dropped by the heartbeat, not by the peer's pause ending 3 s after it began.
        #expect(Date().timeIntervalSince(start) < 2.9)
        try await server.stop()
    }

    @Test func heartbeatDropsTheSilentPeerWithinTheTimeout() async throws {
        var options = MessageServerOptions()
        options.heartbeat = .dropSilentPeers(after: .milliseconds(1500))
        let server = try await TestServer.start("ws://127.0.0.1:0", options: options)
        let handshake = Array("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".utf8)
        let silent = try RawSocket(port: server.port)
        silent.write(handshake)
        try await server.wait("the silent peer") { $0.connected.count == 1 }
        // A chatty client keeps sending (masked "hi" frames) until the silent one is
        // dropped, from a thread of its own (see ChattyWriter).
        let chatty = try RawSocket(port: server.port)
        chatty.write(handshake)
        let writer = ChattyWriter(chatty, [0x81, 0x82, 1, 2, 3, 4, 0x68 ^ 1, 0x69 ^ 2])
        try await server.wait("the drop", timeout: 15) { $0.closes.count >= 1 }
        writer.stop()
        let closes = try await server.onLoop { server.closes }
        #expect(closes.count == 1 && closes[0].id == 1 && closes[0].info.code == 1006)
        #expect(try await server.onLoop { server.server.peers.map(\.id) } == [2])
        #expect(silent.readToEnd().eof)
        try await server.stop()
    }

    /// `heartbeat = { interval = 0.3, timeout = 60 }`: an idle peer that answers every ping
    /// (node-ws does, by itself) is pinged every 0.3 s or so, not once per `interval +
    /// timeout`: its pong must bring the next ping forward. node-ws closes after the fifth
    /// ping (about 1.5 s); pings paced by the timeout would take four minutes, past the
    /// 30 s node gives itself. Counts, not a window of seconds: a loaded machine's late
    /// timers cannot fail it.
    @Test func heartbeatPingsAnAnsweringIdlePeerEveryInterval() async throws {
        var options = MessageServerOptions()
        options.heartbeat = HeartbeatMonitor.Configuration(interval: .milliseconds(300), timeout: .seconds(60), probe: .ping, watch: .inboundSilence)
        let server = try await TestServer.start("ws://127.0.0.1:0/", options: options)
        let script = """
            module.paths.push('/usr/share/nodejs');
            const WebSocket = require('ws');
            const ws = new WebSocket(process.argv[1]);
            let pings = 0;
            ws.on('ping', () => { pings += 1; if (pings === 5) ws.close(1000); });
            const giveUp = setTimeout(() => ws.close(1000), 30000);
            ws.on('close', (code) => { clearTimeout(giveUp); console.log(JSON.stringify({ pings, code })); });
            ws.on('error', (e) => console.log(JSON.stringify({ error: String(e) })));
            """
        let output = try Self.runNode(script, args: ["ws://127.0.0.1:\(server.port)/"])
        let result = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
        #expect(result?["pings"] as? Int ?? 0 >= 5, "\(output)")
        #expect(result?["code"] as? Int == 1000, "\(output)")
        try await server.wait("the close") { $0.closes.count == 1 }
        try await server.stop()
    }

    @Test func broadcastReachesAllAndCloseSendsGoingAway() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0")
        try await server.onLoop {
            server.onMessage = { _, _, _ in
                // Every client says "ready" once; when all three did, broadcast and shut down.
                if server.messages.count == 3 {
                    _ = try? server.server.broadcast(ByteBuffer(string: "news"), kind: .text)
                    server.server.close()
                }
            }
        }
        let port = server.port
        let results = try await withThrowingTaskGroup(of: [ClientEvent].self) { group in
            for _ in 0..<3 {
                group.addTask {
                    try await TestClient.run("ws://127.0.0.1:\(port)/", script: ClientScript(onOpen: { c, _ in try? c.send(.text("ready"), kind: .text) }))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for events in results {
            #expect(events.contains(.message(Array("news".utf8), .text)))
            #expect(events.last == .close(CloseInfo(code: 1001, reason: "server shutting down", clean: true, initiator: .peer)))
        }
        try await server.onLoop { server.server.closeFuture }.get()
    }

    /// `peers` (which a broadcast walks) is kept between changes: it must follow every
    /// connect and every close, in id order.
    @Test func peersFollowEveryConnectAndClose() async throws {
        final class Seen: @unchecked Sendable { var counts: [Int] = [] }
        let seen = Seen()
        let server = try await TestServer.start("ws://127.0.0.1:0")
        try await server.onLoop {
            server.onConnect = { _ in seen.counts.append(server.server.peers.count) }
        }
        let port = server.port
        let clients = Task {
            try await withThrowingTaskGroup(of: [ClientEvent].self) { group in
                for _ in 0..<3 {
                    group.addTask {
                        try await TestClient.run("ws://127.0.0.1:\(port)/", script: ClientScript(
                            onOpen: { c, _ in try? c.send(.text("ready"), kind: .text) },
                            onMessage: { c, _, _ in try? c.close() }))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        try await server.wait("three clients") { $0.messages.count == 3 }
        let ids = try await server.onLoop { server.server.peers.map(\.id) }
        let counts = try await server.onLoop { seen.counts }
        let connected = try await server.onLoop { server.connected.map(\.id) }
        #expect(counts == [1, 2, 3])
        #expect(ids == connected.sorted())
        try await server.onLoop { try? server.peer(ids[0])?.close(code: 1000, reason: "") }
        try await server.wait("the first peer's close") { $0.closes.count == 1 }
        let left = try await server.onLoop { server.server.peers.map(\.id) }
        let reached = try await server.onLoop { try server.server.broadcast(ByteBuffer(string: "bye"), kind: .text) }
        #expect(left == Array(ids.dropFirst()))
        #expect(reached == 2)
        let results = try await clients.value
        #expect(results.filter { $0.contains(.message(Array("bye".utf8), .text)) }.count == 2)
        try await server.wait("every close") { $0.closes.count == 3 }
        let empty = try await server.onLoop { server.server.peers.isEmpty }
        #expect(empty)
        try await server.stop()
    }

    @Test func compressedEchoWithOurClient() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0", options: MessageServerOptions(compress: true), echo: true)
        let big = String(repeating: "compress me ", count: 1000)
        let events = try await TestClient.run(
            "ws://127.0.0.1:\(server.port)/",
            options: Self.compressing,
            script: ClientScript(onOpen: { c, _ in try? c.send(.text(big), kind: .text) }, onMessage: { c, _, _ in try? c.close() })
        )
        #expect(events.first == .open(subprotocol: nil, compressed: true))
        #expect(events.dropFirst().first?.text == big)
        try await server.stop()
    }

    /// A closed peer lets go of its zlib streams and of a message being assembled at once,
    /// not when whoever holds the peer (a Lua script: its garbage collector) drops it.
    @Test func closedPeerReleasesItsCompressionState() async throws {
        final class Held: @unchecked Sendable { var peer: ServerPeer? }
        let held = Held()
        let server = try await TestServer.start("ws://127.0.0.1:0", options: MessageServerOptions(compress: true), echo: true)
        try await server.onLoop { server.onConnect = { held.peer = $0 } }
        let events = try await TestClient.run(
            "ws://127.0.0.1:\(server.port)/",
            options: Self.compressing,
            script: ClientScript(onOpen: { c, _ in try? c.send(.text("hello"), kind: .text) }, onMessage: { c, _, _ in try? c.close() })
        )
        #expect(events.first == .open(subprotocol: nil, compressed: true))
        try await server.wait("the close") { $0.closes.count == 1 }
        try await server.wait("the compression state released") { _ in held.peer != nil && held.peer?.deflate == nil }
        try await server.stop()
    }

    @Test("node-ws client: subprotocol, compression, echo, close code", arguments: [false, true])
    func nodeWSClient(compress: Bool) async throws {
        let server = try await TestServer.start("wss://127.0.0.1:0/", options: try Self.tlsOptions(compress: compress), echo: true)
        let script = """
            module.paths.push('/usr/share/nodejs');
            const WebSocket = require('ws');
            const ws = new WebSocket(process.argv[1], ['v9', 'chat'], { ca: require('fs').readFileSync(process.argv[2]) });
            const got = [];
            ws.on('open', () => { ws.send('hello ' + 'x'.repeat(2000)); ws.send(Buffer.from([1, 2, 3])); });
            ws.on('message', (data, isBinary) => {
              got.push(isBinary ? 'binary:' + data.length : data.toString().slice(0, 5));
              if (got.length === 2) ws.close(4000, 'done');
            });
            ws.on('close', (code, reason) => {
              console.log(JSON.stringify({ got, code, reason: reason.toString(), protocol: ws.protocol, ext: ws.extensions }));
            });
            ws.on('error', (e) => { console.log(JSON.stringify({ error: String(e) })); });
            """
        let output = try Self.runNode(script, args: ["wss://localhost:\(server.port)/x", try TLSFixture.files.get().ca])
        let result = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
        #expect(result?["got"] as? [String] == ["hello", "binary:3"], "\(output)")
        #expect(result?["code"] as? Int == 4000)
        #expect(result?["protocol"] as? String == "chat")
        #expect((result?["ext"] as? String ?? "").contains("permessage-deflate") == compress)
        try await server.wait("the close") { $0.closes.count == 1 }
        #expect(try await server.onLoop { server.closes[0].info } == CloseInfo(code: 4000, reason: "done", clean: true, initiator: .peer))
        try await server.stop()
    }

    static func tlsOptions(compress: Bool) throws -> MessageServerOptions {
        let files = try TLSFixture.files.get()
        return MessageServerOptions(
            protocols: ["chat"],
            compress: compress,
            tls: TLSOptions(certificateFile: files.cert, privateKeyFile: files.key)
        )
    }

    static func runNode(_ script: String, args: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["node", "-e", script] + args
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = killAfter(process, seconds: 120)
        defer { deadline.cancel() }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Completes with the final close report of a managed connection.
private final class CloseWatcher: ManagedConnectionDelegate {
    let done: EventLoopPromise<ConnectionLifecycle.CloseReport>
    init(done: EventLoopPromise<ConnectionLifecycle.CloseReport>) { self.done = done }
    func managedConnectionDidOpen(_ connection: ManagedConnection, info: ManagedConnection.OpenInfo) {}
    func managedConnection(_ connection: ManagedConnection, didReceive message: ByteBuffer, kind: MessageKind) {}
    func managedConnection(_ connection: ManagedConnection, didFail error: ConnectionError) {}
    func managedConnection(_ connection: ManagedConnection, didClose report: ConnectionLifecycle.CloseReport) {
        self.done.succeed(report)
    }
}
