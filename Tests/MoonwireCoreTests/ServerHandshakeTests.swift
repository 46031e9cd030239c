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
    ]

    @Test(arguments: 0..<brokenRequests.count)
    func aBrokenUpgradeGets400WithTheReasonAndNoUpgrade(_ index: Int) async throws {
        let (name, request, reason) = Self.brokenRequests[index]
        let server = try await TestServer.start("ws://127.0.0.1:0/", echo: true)
        let answer = try Self.answer(server, request)
        #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(name): \(answer)")
        if name != "HEAD" { #expect(answer.contains(reason), "\(name): \(answer)") }
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
}
