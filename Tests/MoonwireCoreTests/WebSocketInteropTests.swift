import Foundation
import NIOCore
import Testing

@testable import MoonwireCore

/// An echo server from another WebSocket implementation, run as a child process from
/// `Peers/`. It prints `READY <port>` and later one `CLOSE <code> <reason>` per client close.
final class PeerProcess: @unchecked Sendable {
    enum Kind: String, Sendable, CaseIterable, CustomStringConvertible {
        case nodeWS = "node-ws"
        case pythonWebsockets = "python-websockets"
        var description: String { self.rawValue }
    }

    static let peersDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Peers")

    private let process = Process()
    private let lock = NSLock()
    private var output = ""
    let port: Int

    init(_ kind: Kind, tls: (cert: String, key: String)? = nil, clientCA: String? = nil) throws {
        let tlsArgs = (tls.map { ["--tls", $0.cert, $0.key] } ?? []) + (clientCA.map { [$0] } ?? [])
        switch kind {
        case .nodeWS:
            self.process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            self.process.arguments = ["node", Self.peersDirectory.appendingPathComponent("echo_node_ws.js").path] + tlsArgs
        case .pythonWebsockets:
            self.process.executableURL = URL(fileURLWithPath: try Self.venvPython())
            self.process.arguments = [Self.peersDirectory.appendingPathComponent("echo_websockets.py").path] + tlsArgs
        }
        let pipe = Pipe()
        self.process.standardOutput = pipe
        self.process.standardError = pipe
        try self.process.run()
        // A peer that never prints READY is killed, so the read below ends.
        let startDeadline = killAfter(self.process, seconds: 30)
        defer { startDeadline.cancel() }
        let handle = pipe.fileHandleForReading
        var port: Int?
        var pending = ""
        let deadline = Date().addingTimeInterval(20)
        // Read synchronously until READY, then keep collecting output on a thread.
        while port == nil {
            let data = handle.availableData
            if data.isEmpty || Date() > deadline { break }
            pending += String(decoding: data, as: UTF8.self)
            if let line = pending.split(separator: "\n").first(where: { $0.hasPrefix("READY ") }) {
                port = Int(line.dropFirst(6))
            }
        }
        guard let port else {
            kill(self.process.processIdentifier, SIGKILL)
            throw PeerError(message: "\(kind) did not print READY; output: \(pending)")
        }
        self.port = port
        self.output = pending
        Thread.detachNewThread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { return }
                self.lock.withLock { self.output += String(decoding: data, as: UTF8.self) }
            }
        }
    }

    /// Creates the venv with `websockets` if needed (Peers/setup_venv.sh) and returns its python.
    static func venvPython() throws -> String {
        let setup = Process()
        setup.executableURL = URL(fileURLWithPath: "/bin/bash")
        setup.arguments = [peersDirectory.appendingPathComponent("setup_venv.sh").path]
        let pipe = Pipe()
        setup.standardOutput = pipe
        setup.standardError = FileHandle.nullDevice
        try setup.run()
        let deadline = killAfter(setup, seconds: 300)
        defer { deadline.cancel() }
        setup.waitUntilExit()
        let path = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard setup.terminationStatus == 0, !path.isEmpty else {
            throw PeerError(message: "setup_venv.sh failed (is PyPI reachable?)")
        }
        return path
    }

    /// The `CLOSE` lines printed so far, waiting up to 20 s (a loaded machine) for at least one.
    func closeLines() async -> [String] {
        for _ in 0..<400 {
            let lines = self.lock.withLock { self.output }.split(separator: "\n").filter { $0.hasPrefix("CLOSE ") }.map(String.init)
            if !lines.isEmpty { return lines }
            try? await Task.sleep(nanoseconds: 50_000_000)
        }
        return []
    }

    func stop() {
        // SIGKILL: children of the test runner inherit a signal mask that blocks SIGTERM.
        kill(self.process.processIdentifier, SIGKILL)
        self.process.waitUntilExit()
    }
}

/// Kills `process` with SIGKILL (its mask blocks SIGTERM) unless the returned
/// item is cancelled first: no helper waits on a child for ever.
func killAfter(_ process: Process, seconds: Double) -> DispatchWorkItem {
    let work = DispatchWorkItem { [pid = process.processIdentifier] in _ = kill(pid, SIGKILL) }
    DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: work)
    return work
}

struct PeerError: Error, CustomStringConvertible {
    var message: String
    var description: String { self.message }
}

/// A CA, a server certificate for localhost/127.0.0.1 signed by it, and an unrelated key,
/// made with openssl once per test run.
enum TLSFixture {
    struct Files: Sendable {
        var dir: String
        var ca: String { dir + "/ca.pem" }
        var cert: String { dir + "/server.pem" }
        var key: String { dir + "/server.key" }
        var clientCert: String { dir + "/client.pem" }
        var clientKey: String { dir + "/client.key" }
        var serverPin: String
        var otherPin: String
    }

    static let files: Result<Files, Error> = Result {
        let dir = NSTemporaryDirectory() + "moonwire-tls-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // Shared by every TLS test, so removed when the test process exits.
        atexit { try? FileManager.default.removeItem(atPath: NSTemporaryDirectory() + "moonwire-tls-\(getpid())") }
        let script = """
            set -e
            cd '\(dir)'
            openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=moonwire-test-ca 2>/dev/null
            openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null
            printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext.cnf
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext.cnf 2>/dev/null
            openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=moonwire-client 2>/dev/null
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 2>/dev/null
            openssl genpkey -algorithm RSA -out other.key 2>/dev/null
            openssl x509 -in server.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64 > server.pin
            openssl pkey -in other.key -pubout -outform der | openssl dgst -sha256 -binary | base64 > other.pin
            """
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/bash")
        shell.arguments = ["-c", script]
        shell.standardOutput = FileHandle.nullDevice
        shell.standardError = FileHandle.nullDevice
        try shell.run()
        let deadline = killAfter(shell, seconds: 120)
        defer { deadline.cancel() }
        shell.waitUntilExit()
        guard shell.terminationStatus == 0 else { throw PeerError(message: "openssl failed") }
        func read(_ name: String) throws -> String {
            try String(contentsOfFile: dir + "/" + name, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return Files(dir: dir, serverPin: try read("server.pin"), otherPin: try read("other.pin"))
    }
}

@Suite("WebSocket client interop with node-ws and Python websockets", .serialized, .timeLimit(.minutes(5)))
struct WebSocketInteropTests {
    @Test("text, binary, fragmented and 16 MiB messages echo back", arguments: PeerProcess.Kind.allCases)
    func echo(kind: PeerProcess.Kind) async throws {
        let peer = try PeerProcess(kind)
        defer { peer.stop() }
        let big = ByteBuffer(bytes: (0..<(16 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        var options = WebSocketClientOptions()
        options.fragmentSize = 1 << 20
        let events = try await TestClient.run(
            "ws://127.0.0.1:\(peer.port)/echo",
            options: options,
            script: ClientScript(
                onOpen: { c, _ in
                    try? c.send(.text("héllo ✓"), kind: .text)
                    try? c.send(ByteBuffer(bytes: [0, 1, 2, 255]), kind: .binary)
                    try? c.sendFragment(.text("frag"), kind: .text, isFinal: false)
                    try? c.sendFragment(.text("mented"), kind: .text, isFinal: true)
                    try? c.send(big, kind: .binary)
                },
                onMessage: { c, _, _ in
                    if c.stats.messagesReceived == 4 { try? c.close(code: 1000, reason: "done") }
                }
            )
        )
        let messages = events.compactMap { e -> ([UInt8], MessageKind)? in
            if case .message(let bytes, let kind) = e { return (bytes, kind) }
            return nil
        }
        #expect(messages.count == 4, "\(events.map { "\($0)".prefix(80) })")
        guard messages.count == 4 else { return }
        #expect(String(decoding: messages[0].0, as: UTF8.self) == "héllo ✓" && messages[0].1 == .text)
        #expect(messages[1].0 == [0, 1, 2, 255] && messages[1].1 == .binary)
        #expect(String(decoding: messages[2].0, as: UTF8.self) == "fragmented")
        #expect(messages[3].0 == Array(big.readableBytesView) && messages[3].1 == .binary)
        #expect(events.last == .close(CloseInfo(code: 1000, reason: "done", clean: true, initiator: .local)))
    }

    @Test("subprotocol negotiation, extra headers and Origin reach the server", arguments: PeerProcess.Kind.allCases)
    func handshake(kind: PeerProcess.Kind) async throws {
        let peer = try PeerProcess(kind)
        defer { peer.stop() }
        var options = WebSocketClientOptions()
        options.protocols = ["nope", "chat.v2"]
        options.headers = [("X-Moonwire-Test", "42"), ("Authorization", "Bearer t0k3n")]
        options.origin = "http://example.test"
        let events = try await TestClient.run(
            "ws://127.0.0.1:\(peer.port)/path?q=1",
            options: options,
            script: ClientScript(
                onOpen: { c, _ in try? c.send(.text("__headers__"), kind: .text) },
                onMessage: { c, _, _ in try? c.close() }
            )
        )
        #expect(events.first == .open(subprotocol: "chat.v2", compressed: false))
        let reply = try #require(events.compactMap(\.text).first)
        let headers = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: String] ?? [:]
        #expect(headers["x-moonwire-test"] == "42")
        #expect(headers["authorization"] == "Bearer t0k3n")
        #expect(headers["origin"] == "http://example.test")
        #expect(headers["sec-websocket-protocol"] == "nope, chat.v2")
        #expect(headers["host"] == "127.0.0.1:\(peer.port)")
    }

    @Test("close codes travel both ways", arguments: PeerProcess.Kind.allCases)
    func closeCodes(kind: PeerProcess.Kind) async throws {
        let peer = try PeerProcess(kind)
        defer { peer.stop() }
        let ours = try await TestClient.run(
            "ws://127.0.0.1:\(peer.port)/",
            script: ClientScript(onOpen: { c, _ in try? c.close(code: 4001, reason: "client bye") })
        )
        #expect(ours.last == .close(CloseInfo(code: 4001, reason: "client bye", clean: true, initiator: .local)))
        #expect(await peer.closeLines().contains("CLOSE 4001 client bye"))

        let theirs = try await TestClient.run(
            "ws://127.0.0.1:\(peer.port)/",
            script: ClientScript(onOpen: { c, _ in try? c.send(.text("__close__ 4002 server bye"), kind: .text) })
        )
        #expect(theirs.last == .close(CloseInfo(code: 4002, reason: "server bye", clean: true, initiator: .peer)))
    }

    @Test("permessage-deflate is negotiated and messages round-trip", arguments: PeerProcess.Kind.allCases)
    func compression(kind: PeerProcess.Kind) async throws {
        let peer = try PeerProcess(kind)
        defer { peer.stop() }
        var options = WebSocketClientOptions()
        options.compress = true
        let text = String(repeating: "the moon is a harsh mistress. ", count: 5000)
        let events = try await TestClient.run(
            "ws://127.0.0.1:\(peer.port)/",
            options: options,
            script: ClientScript(
                onOpen: { c, _ in
                    try? c.send(.text(text), kind: .text)
                    try? c.send(.text("short"), kind: .text)
                    try? c.send(.text(text), kind: .text)
                },
                onMessage: { c, _, _ in
                    if c.stats.messagesReceived == 3 { try? c.close() }
                }
            )
        )
        #expect(events.first == .open(subprotocol: nil, compressed: true))
        #expect(events.compactMap(\.text) == [text, "short", text])
    }

    @Test("wss with a test CA; SPKI pin accepted when it matches", arguments: PeerProcess.Kind.allCases)
    func tls(kind: PeerProcess.Kind) async throws {
        let files = try TLSFixture.files.get()
        let peer = try PeerProcess(kind, tls: (files.cert, files.key))
        defer { peer.stop() }
        for tls in [TLSOptions(caFile: files.ca), TLSOptions(pinSHA256: ["sha256/" + files.serverPin])] {
            var options = WebSocketClientOptions()
            options.tls = tls
            let events = try await TestClient.run(
                "wss://localhost:\(peer.port)/",
                options: options,
                script: ClientScript(
                    onOpen: { c, _ in try? c.send(.text("secure"), kind: .text) },
                    onMessage: { c, _, _ in try? c.close() }
                )
            )
            #expect(events.compactMap(\.text) == ["secure"], "\(tls): \(events)")
        }
    }

    @Test("wss refused: pin mismatch names the pin, unknown CA fails verification")
    func tlsRefused() async throws {
        let files = try TLSFixture.files.get()
        let peer = try PeerProcess(.nodeWS, tls: (files.cert, files.key))
        defer { peer.stop() }
        var options = WebSocketClientOptions()
        options.tls = TLSOptions(caFile: files.ca, pinSHA256: [files.otherPin])
        let pinned = try await TestClient.run("wss://localhost:\(peer.port)/", options: options)
        guard case .fail(let error) = pinned.last, pinned.count == 1 else {
            Issue.record("expected one failure: \(pinned)")
            return
        }
        #expect(error.step == .tls)
        #expect(error.description.contains("certificate pin mismatch (expected sha256/\(files.otherPin)"), "\(error)")
        #expect(error.description.contains("sha256/\(files.serverPin)"), "\(error)")

        let untrusted = try await TestClient.run("wss://127.0.0.1:\(peer.port)/")
        let refusal = try #require(untrusted.failure, "expected a failure: \(untrusted)")
        #expect(refusal.step == .tls, "\(refusal)")
        #expect(refusal.description.hasPrefix("tls: certificate verify failed"), "\(refusal)")
    }
}

extension WebSocketInteropTests {
    @Test("client certificate: accepted when presented, handshake refused without")
    func clientCertificate() async throws {
        let files = try TLSFixture.files.get()
        let peer = try PeerProcess(.nodeWS, tls: (files.cert, files.key), clientCA: files.ca)
        defer { peer.stop() }
        var options = WebSocketClientOptions()
        options.tls = TLSOptions(caFile: files.ca, certificateFile: files.clientCert, privateKeyFile: files.clientKey)
        let events = try await TestClient.run(
            "wss://localhost:\(peer.port)/",
            options: options,
            script: ClientScript(
                onOpen: { c, _ in try? c.send(.text("mutual"), kind: .text) },
                onMessage: { c, _, _ in try? c.close() }
            )
        )
        #expect(events.compactMap(\.text) == ["mutual"], "\(events)")

        options.tls = TLSOptions(caFile: files.ca)
        let refused = try await TestClient.run("wss://localhost:\(peer.port)/", options: options)
        let error = try #require(refused.failure, "expected a failure: \(refused)")
        #expect(error.step == .tls, "\(error)")
    }

    @Test("ws://user:password@host/ is HTTP Basic authentication; an Authorization header of the script's wins", arguments: PeerProcess.Kind.allCases)
    func credentialsInTheURL(kind: PeerProcess.Kind) async throws {
        let peer = try PeerProcess(kind)
        defer { peer.stop() }
        let echo = ClientScript(onOpen: { c, _ in try? c.send(.text("__headers__"), kind: .text) }, onMessage: { c, _, _ in try? c.close() })
        let events = try await TestClient.run("ws://ann:s%40cret%201@127.0.0.1:\(peer.port)/private", script: echo)
        let headers = try events.compactMap(\.text).first.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(headers??["authorization"] as? String == "Basic YW5uOnNAY3JldCAx", "\(events)")

        let wrong = try await TestClient.run("ws://ann:guess@127.0.0.1:\(peer.port)/private")
        let error = try #require(wrong.failure, "expected a failure: \(wrong)")
        #expect(error.httpStatus == 401, "\(error)")

        var options = WebSocketClientOptions()
        options.headers = [("Authorization", "Bearer t0k3n")]
        let own = try await TestClient.run("ws://ann:s%40cret%201@127.0.0.1:\(peer.port)/", options: options, script: echo)
        let sent = try own.compactMap(\.text).first.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(sent??["authorization"] as? String == "Bearer t0k3n", "\(own)")
    }

    @Test("a refused upgrade's error carries the first line of the response's body", arguments: PeerProcess.Kind.allCases)
    func refusalBody(kind: PeerProcess.Kind) async throws {
        let peer = try PeerProcess(kind)
        defer { peer.stop() }
        let events = try await TestClient.run("ws://127.0.0.1:\(peer.port)/refuse")
        let error = try #require(events.failure, "expected a failure: \(events)")
        #expect(error.description == "handshake: HTTP 403 Forbidden: no token given")
        #expect(error.httpStatus == 403)
    }
}

@Suite("WebSocket dial failures name their step", .timeLimit(.minutes(5)))
struct WebSocketDialFailureTests {
    private func failure(_ url: String, options: WebSocketClientOptions = WebSocketClientOptions()) async throws -> ConnectionError? {
        let events = try await TestClient.run(url, options: options)
        guard events.count == 1, case .fail(let error) = events[0] else {
            Issue.record("expected exactly one failure: \(events)")
            return nil
        }
        return error
    }

    @Test("connect: connection refused, with the address")
    func refused() async throws {
        let error = try await failure("ws://127.0.0.1:9/")
        #expect(error?.description == "connect: connection refused (127.0.0.1:9)")
    }

    @Test("dns: unknown host")
    func dns() async throws {
        let error = try await failure("ws://no-such-host.invalid/")
        #expect(error?.step == .dns, "\(String(describing: error))")
    }

    @Test("handshake: HTTP status of a refused upgrade")
    func httpStatus() async throws {
        let peer = try await HostilePeer.start([], response: "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
        defer { Task { await peer.stop() } }
        let error = try await failure("ws://127.0.0.1:\(peer.port)/")
        #expect(error?.description == "handshake: HTTP 401 Unauthorized")
        #expect(error?.httpStatus == 401)
    }

    @Test("handshake: an HTML error page adds nothing to the status line")
    func htmlRefusal() async throws {
        let page = "<html><head><title>404 Not Found</title></head><body>nginx</body></html>"
        let peer = try await HostilePeer.start([], response: "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: \(page.utf8.count)\r\n\r\n\(page)")
        defer { Task { await peer.stop() } }
        let error = try await failure("ws://127.0.0.1:\(peer.port)/")
        #expect(error?.description == "handshake: HTTP 404 Not Found")
    }

    @Test("the body line a refusal shows: text only, once, escaped and short")
    func refusalLine() {
        func message(_ body: [UInt8], reason: String = "Bad Request") -> String {
            var refusal = Refusal(status: 400, reason: reason)
            refusal.append(ByteBuffer(bytes: body))
            return refusal.message
        }
        #expect(message(Array("\n  missing subprotocol.  \r\nmore\n".utf8)) == "HTTP 400 Bad Request: missing subprotocol.")
        #expect(message(Array("Unauthorized".utf8), reason: "Unauthorized") == "HTTP 400 Unauthorized", "node's ws: the reason again")
        #expect(message([0x66, 0xff, 0x66]) == "HTTP 400 Bad Request", "not UTF-8")
        #expect(message(Array("a\u{1b}[2Jb".utf8)) == "HTTP 400 Bad Request: a\\u{1b}[2Jb")
        #expect(message(Array(String(repeating: "x", count: 300).utf8)) == "HTTP 400 Bad Request: " + String(repeating: "x", count: 200) + "…")
        #expect(message([]) == "HTTP 400 Bad Request")
        #expect(message(Array("no reason".utf8), reason: "") == "HTTP 400: no reason")
        var big = Refusal(status: 500, reason: "x")
        big.append(ByteBuffer(bytes: [UInt8](repeating: 0x61, count: 5000)))
        #expect(big.body.count == Refusal.bodyLimit)
        // One line longer than the bytes kept, cut inside a character: still shown.
        var cut = Refusal(status: 500, reason: "x")
        cut.append(ByteBuffer(bytes: [0x61] + Array(String(repeating: "é", count: 600).utf8)))
        #expect(cut.message == "HTTP 500 x: a" + String(repeating: "é", count: 199) + "…")
    }

    @Test("handshake: a subprotocol we did not offer")
    func badSubprotocol() async throws {
        let peer = try await HostilePeer.start([], extraResponseHeaders: "Sec-WebSocket-Protocol: evil\r\n")
        defer { Task { await peer.stop() } }
        var options = WebSocketClientOptions()
        options.protocols = ["chat.v2"]
        let error = try await failure("ws://127.0.0.1:\(peer.port)/", options: options)
        #expect(error?.description == "handshake: server chose subprotocol 'evil', offered: chat.v2")
    }

    @Test("timeout: a server that never answers the upgrade")
    func timeout() async throws {
        let peer = try await HostilePeer.start([], response: "")
        defer { Task { await peer.stop() } }
        var options = WebSocketClientOptions()
        options.connectTimeout = .milliseconds(300)
        let error = try await failure("ws://127.0.0.1:\(peer.port)/", options: options)
        #expect(error?.step == .timeout, "\(String(describing: error))")
    }
}
