import Foundation
import NIOCore
import Testing

@testable import MoonwireCore

/// The server holds upgrade requests to RFC 6455 and bounds their headers, over real
/// sockets: what it refuses gets an HTTP error with a reason and never a 101.
@Suite("WebSocket server handshake: strict RFC 6455, bounded headers", .serialized, .timeLimit(.minutes(5)))
struct ServerHandshakeTests {
    static func upgrade(method: String = "GET", version: String = "HTTP/1.1", key: String = "dGhlIHNhbXBsZSBub25jZQ==", extra: [String] = []) -> [UInt8] {
        let lines = ["\(method) / \(version)", "Host: 127.0.0.1", "Upgrade: websocket", "Connection: Upgrade",
                     "Sec-WebSocket-Key: \(key)", "Sec-WebSocket-Version: 13"] + extra
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
    }

    /// The good upgrade's lines with those whose name is in `drop` left out (and `extra` added).
    static func upgrade(dropping drop: [String], extra: [String] = []) -> [UInt8] {
        let lines = ["GET / HTTP/1.1", "Host: 127.0.0.1", "Upgrade: websocket", "Connection: Upgrade",
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13"]
        let kept = lines.filter { line in !drop.contains { line.hasPrefix($0 + ":") } } + extra
        return Array((kept.joined(separator: "\r\n") + "\r\n\r\n").utf8)
    }

    /// The answer's head, up to its blank line, read a byte at a time so nothing after it is taken.
    static func readHead(_ socket: RawSocket) -> String {
        var head: [UInt8] = []
        while !head.reversed().starts(with: [10, 13, 10, 13]) {
            let byte = socket.read(count: 1)
            guard byte.count == 1 else { break }
            head += byte
        }
        return String(decoding: head, as: UTF8.self)
    }

    /// Sends `request` on a fresh connection and returns the whole answer, up to the
    /// server's close: EOF, or a reset when it closed before reading all of a flood.
    static func answer(_ server: TestServer, _ request: [UInt8]) throws -> String {
        let socket = try RawSocket(port: server.port)
        socket.write(request)
        return String(decoding: socket.readToEnd().bytes, as: UTF8.self)
    }

    static let brokenRequests: [(String, [UInt8], String)] = [
        ("POST", upgrade(method: "POST"), "must be GET, not POST"),
        ("HEAD", upgrade(method: "HEAD"), "must be GET, not HEAD"),
        ("HTTP/1.0", upgrade(version: "HTTP/1.0"), "needs HTTP/1.1 or later, not HTTP/1.0"),
        ("15-byte key", upgrade(key: Data(repeating: 7, count: 15).base64EncodedString()), "base64 of 16 bytes"),
        ("17-byte key", upgrade(key: Data(repeating: 7, count: 17).base64EncodedString()), "base64 of 16 bytes"),
        ("key not base64", upgrade(key: "not*base64*at*all*here=="), "base64 of 16 bytes"),
        ("key without padding", upgrade(key: "dGhlIHNhbXBsZSBub25jZQ"), "base64 of 16 bytes"),
        ("two keys", upgrade(extra: ["Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]), "exactly one Sec-WebSocket-Key"),
        ("no key", upgrade(dropping: ["Sec-WebSocket-Key"]), "exactly one Sec-WebSocket-Key, not 0"),
        ("version 8", upgrade(dropping: ["Sec-WebSocket-Version"], extra: ["Sec-WebSocket-Version: 8"]), "Sec-WebSocket-Version 13 only"),
        ("no version", upgrade(dropping: ["Sec-WebSocket-Version"]), "Sec-WebSocket-Version 13 only"),
        ("no Host", upgrade(dropping: ["Host"]), "exactly one Host, not 0"),
        ("Connection without upgrade", upgrade(dropping: ["Connection"], extra: ["Connection: keep-alive"]), "needs Connection: Upgrade"),
        ("Upgrade to another protocol", upgrade(dropping: ["Upgrade"], extra: ["Upgrade: h2c"]), "not a WebSocket upgrade"),
        ("line ending in LF alone", Array("GET / HTTP/1.1\nHost: x\n\n".utf8), "not an HTTP/1.1 request (a line that does not end in CR LF)"),
        ("folded header line", upgrade(extra: ["X-A: 1", " folded"]), "not an HTTP/1.1 request (a header line folded"),
        ("space before the colon", upgrade(extra: ["X-A : 1"]), "not an HTTP/1.1 request (not a header name)"),
        ("header line without a colon", upgrade(extra: ["X-A"]), "not an HTTP/1.1 request (a header line without a colon)"),
        ("control character in a value", upgrade(extra: ["X-A: a\u{1}b"]), "not an HTTP/1.1 request (a control character"),
        ("not a request line", Array("GET /\r\nHost: x\r\n\r\n".utf8), "not an HTTP/1.1 request (not a request line"),
        ("not an HTTP version", upgrade(version: "HTTP/1.1x"), "not an HTTP/1.1 request (not an HTTP version)"),
    ]

    @Test(arguments: 0..<brokenRequests.count)
    func aBrokenUpgradeGets400WithTheReasonAndNoUpgrade(_ index: Int) async throws {
        let (name, request, reason) = Self.brokenRequests[index]
        let server = try await TestServer.start("ws://127.0.0.1:0/", echo: true)
        let answer = try Self.answer(server, request)
        #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(name): \(answer)")
        if name != "HEAD" { #expect(answer.contains(reason), "\(name): \(answer)") } else { #expect(answer.hasSuffix("\r\n\r\n"), "HEAD: no body") }
        #expect(answer.contains("Sec-WebSocket-Version: 13\r\n") == reason.hasSuffix("13 only"), "\(name): \(answer)")
        #expect(!answer.contains("101"), "\(name): \(answer)")
        // The same server still upgrades a good request, and never saw a peer before it.
        var good: RawSocket? = try RawSocket(port: server.port)
        good?.write(Self.upgrade())
        try await server.wait("the good peer") { $0.connected.count == 1 }
        #expect(try await server.onLoop { server.connected.map(\.id) } == [1])
        good = nil
        try await server.stop()
    }

    /// 128 header fields are taken; 129 get 431 while being parsed, and so do 10 000
    /// minimal ones (50 KB, under the 80 KiB bound on their bytes).
    @Test func headerFieldsAreCountedAndAFloodGets431() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0/", echo: true)
        #expect(try await server.onLoop { server.server.options.maxHeaders } == 128)
        // upgrade() has 5 header fields.
        let fits = Self.upgrade(extra: (1...123).map { "X-H\($0): v" })
        var socket: RawSocket? = try RawSocket(port: server.port)
        socket?.write(fits)
        try await server.wait("the peer with 128 header fields") { $0.connected.count == 1 }
        #expect(try await server.onLoop { server.connected[0].request.headers.count } == 128)

        let oneTooMany = try Self.answer(server, Self.upgrade(extra: (1...124).map { "X-H\($0): v" }))
        #expect(oneTooMany.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "\(oneTooMany)")
        #expect(oneTooMany.contains("more than 128 header fields"), "\(oneTooMany)")
        let flood = try Self.answer(server, Self.upgrade(extra: Array(repeating: "a:b", count: 10_000)))
        #expect(flood.hasPrefix("HTTP/1.1 431 "), "\(flood.prefix(200))")
        // Plain HTTP with a flood of headers is refused the same way.
        let plain = try Self.answer(server, Array(("GET / HTTP/1.1\r\n" + String(repeating: "a:b\r\n", count: 10_000) + "\r\n").utf8))
        #expect(plain.hasPrefix("HTTP/1.1 431 "), "\(plain.prefix(200))")
        #expect(try await server.onLoop { server.connected.count } == 1)
        socket = nil
        try await server.stop()
    }

    /// The delegate gets the request's headers; the peer does not keep them, nor, once
    /// closed, its path: a peer held after its connection (by a Lua script until its
    /// collector runs) holds its id, address and counters.
    @Test func aPeerKeepsNeitherTheHeadersNorAfterItsCloseThePath() async throws {
        final class Held: @unchecked Sendable { var peer: ServerPeer? }
        let held = Held()
        let server = try await TestServer.start("ws://127.0.0.1:0/", echo: true)
        try await server.onLoop { server.onConnect = { held.peer = $0 } }
        let bulky = (1...100).map { "X-Bulk-\($0): " + String(repeating: "b", count: 700) }
        var socket: RawSocket? = try RawSocket(port: server.port)
        socket?.write(Self.upgrade(extra: bulky))
        try await server.wait("the peer") { $0.connected.count == 1 }
        let (given, kept, path) = try await server.onLoop {
            (server.connected[0].request.headers.count, held.peer?.request.headers.count, held.peer?.request.path)
        }
        #expect(given == 105)
        #expect(kept == 0)
        #expect(path == "/")
        socket = nil
        try await server.wait("the close") { $0.closes.count == 1 }
        #expect(try await server.onLoop { held.peer?.request.path } == "")
        try await server.stop()
    }

    /// Plain HTTP gets 400 with `Upgrade: websocket`, a body saying why, and the close.
    @Test func plainHTTPGets400() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0/", echo: true)
        let answer = try Self.answer(server, Array("GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(answer)")
        #expect(answer.contains("\r\nUpgrade: websocket\r\n"), "\(answer)")
        #expect(answer.hasSuffix("\r\n\r\nthis is a WebSocket server: send a GET with Upgrade: websocket\n"), "\(answer)")
        #expect(try await server.onLoop { server.connected.count } == 0)
        try await server.stop()
    }

    /// Header values and names are compared as RFC 6455 says: `Connection` is a token
    /// list, tokens and names are case-insensitive; the answer carries the accept value of
    /// RFC 6455's own example.
    @Test func tokenListsAndAnyCaseAreUpgraded() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0/", echo: true)
        let request = Array(("GET /?a=1 HTTP/1.1\r\nhost: x\r\nUPGRADE: WebSocket\r\nconnection: keep-alive, Upgrade\r\n"
            + "sec-websocket-key:dGhlIHNhbXBsZSBub25jZQ==  \r\nsec-websocket-version: \t13\r\n\r\n").utf8)
        var socket: RawSocket? = try RawSocket(port: server.port)
        socket?.write(request)
        let head = socket.map(Self.readHead) ?? ""
        #expect(head.hasPrefix("HTTP/1.1 101 Switching Protocols\r\n"), "\(head)")
        #expect(head.contains("\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"), "\(head)")
        try await server.wait("the peer") { $0.connected.count == 1 }
        let request1 = try await server.onLoop { server.connected[0].request }
        #expect(request1.path == "/?a=1")
        #expect(request1.headers["Sec-WebSocket-Key"] == ["dGhlIHNhbXBsZSBub25jZQ=="])
        #expect(request1.headers["sec-websocket-version"] == ["13"])
        // Closed first: the server's close would otherwise wait closeTimeout for our close frame.
        socket = nil
        try await server.stop()
    }

    /// One header larger than the bound on header bytes gets 431 and a request line
    /// longer than it 400, both before the line is complete.
    @Test func anOversizedHeaderGets431AndAnOversizedRequestLine400() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0/", echo: true)
        let big = Self.upgrade(extra: ["X-Big: " + String(repeating: "b", count: 81 * 1024)])
        let answer = try Self.answer(server, big)
        #expect(answer.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "\(answer.prefix(200))")
        // Names and values count, not the white space around values.
        let spread = Self.upgrade(extra: (1...100).map { "X-H\($0): " + String(repeating: "v", count: 850) })
        let spreadAnswer = try Self.answer(server, spread)
        #expect(spreadAnswer.hasPrefix("HTTP/1.1 431 "), "\(spreadAnswer.prefix(200))")
        let longTarget = try Self.answer(server, Array(("GET /" + String(repeating: "p", count: 81 * 1024)).utf8))
        #expect(longTarget.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(longTarget.prefix(200))")
        #expect(longTarget.contains("a request line of more than"), "\(longTarget.prefix(200))")
        #expect(try await server.onLoop { server.connected.count } == 0)
        try await server.stop()
    }

    /// A request that arrives a few bytes per read is upgraded like one that comes whole,
    /// with its headers intact.
    @Test func aRequestSplitAcrossManyReadsIsUpgraded() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0/", echo: true)
        var socket: RawSocket? = try RawSocket(port: server.port)
        let request = Self.upgrade(extra: ["X-Split: across reads"])
        socket?.write(request, in: 3, pause: 1000)
        #expect(socket.map(Self.readHead)?.hasPrefix("HTTP/1.1 101 ") == true)
        try await server.wait("the peer") { $0.connected.count == 1 }
        #expect(try await server.onLoop { server.connected[0].request.headers["X-Split"] } == ["across reads"])
        socket = nil
        try await server.stop()
    }

    /// Frames the client sent with its request, in the same write, are the peer's first
    /// messages, after its connect.
    @Test func framesPipelinedAfterTheRequestAreTheFirstMessages() async throws {
        let server = try await TestServer.start("ws://127.0.0.1:0/", echo: true)
        var socket: RawSocket? = try RawSocket(port: server.port)
        let mask: [UInt8] = [1, 2, 3, 4]
        func frame(_ text: String) -> [UInt8] {
            let payload = Array(text.utf8)
            return [0x81, 0x80 | UInt8(payload.count)] + mask + payload.enumerated().map { $1 ^ mask[$0 % 4] }
        }
        socket?.write(Self.upgrade() + frame("first") + frame("second"))
        #expect(socket.map(Self.readHead)?.hasPrefix("HTTP/1.1 101 ") == true)
        // The echoes: unmasked text frames.
        #expect(socket?.read(count: 15) == [0x81, 5] + Array("first".utf8) + [0x81, 6] + Array("second".utf8))
        let (connected, messages) = try await server.onLoop { (server.connected.count, server.messages.map(\.text)) }
        #expect(connected == 1)
        #expect(messages == ["first", "second"])
        socket = nil
        try await server.stop()
    }

    /// The handshakes under way share one timer: one that ends between others (upgraded
    /// here) leaves their timeouts as they were, and is not dropped itself.
    @Test func aHandshakeThatEndsAmongSlowOnesKeepsTheirTimeoutsAndItsPeer() async throws {
        var options = MessageServerOptions()
        options.handshakeTimeout = .seconds(1)
        let server = try await TestServer.start("ws://127.0.0.1:0/", options: options, echo: true)
        let request = Self.upgrade()
        let slow = try (0..<3).map { _ in try RawSocket(port: server.port) }
        var good: RawSocket? = try RawSocket(port: server.port)
        let last = try RawSocket(port: server.port)
        for socket in slow + [good!, last] { socket.write(Array(request.prefix(20))) }
        good?.write(Array(request.dropFirst(20)))
        #expect(good.map(Self.readHead)?.hasPrefix("HTTP/1.1 101 ") == true)
        for socket in slow + [last] {
            let reply = socket.readToEnd()
            #expect(reply.eof && reply.bytes.isEmpty, "dropped unanswered")
        }
        let (connected, closes) = try await server.onLoop { (server.connected.count, server.closes.count) }
        #expect(connected == 1)
        #expect(closes == 0)
        good = nil
        try await server.stop()
    }
}
