import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The server's side of the HTTP/1.1 upgrade to WebSocket. It first holds the request to
/// what RFC 6455 requires of it (NIO checks neither the method, nor the HTTP version, nor
/// the key's length): a request that falls short is refused through the ``HandshakeGate``
/// with 400 and the reason. NIO's ``NIOWebSocketServerUpgrader`` then computes
/// `Sec-WebSocket-Accept`, and this wrapper installs moonwire's own frame handling (the
/// same streaming parser and assembler the client runs, in the server role) instead of
/// NIO's whole-frame decoder and encoder.
final class WebSocketServerUpgrader: HTTPServerProtocolUpgrader {
    private let nio: NIOWebSocketServerUpgrader
    private let gate: HandshakeGate
    private let onUpgrade: (Channel, HTTPRequestHead) throws -> Void

    var supportedProtocol: String { self.nio.supportedProtocol }
    var requiredUpgradeHeaders: [String] { self.nio.requiredUpgradeHeaders }

    init(
        gate: HandshakeGate,
        shouldUpgrade: @escaping @Sendable (Channel, HTTPRequestHead) -> EventLoopFuture<HTTPHeaders?>,
        onUpgrade: @escaping (Channel, HTTPRequestHead) throws -> Void
    ) {
        // NIO only calls this closure from its own upgrade(), which we never forward to.
        self.nio = NIOWebSocketServerUpgrader(
            automaticErrorHandling: false,
            shouldUpgrade: shouldUpgrade,
            upgradePipelineHandler: { channel, _ in channel.eventLoop.makeSucceededVoidFuture() }
        )
        self.gate = gate
        self.onUpgrade = onUpgrade
    }

    func buildUpgradeResponse(channel: Channel, upgradeRequest: HTTPRequestHead, initialResponseHeaders: HTTPHeaders) -> EventLoopFuture<HTTPHeaders> {
        if let problem = Self.violation(of: upgradeRequest) {
            self.gate.refuse(.badRequest, problem)
            return channel.eventLoop.makeFailedFuture(NIOWebSocketUpgradeError.invalidUpgradeHeader)
        }
        return self.nio.buildUpgradeResponse(channel: channel, upgradeRequest: upgradeRequest, initialResponseHeaders: initialResponseHeaders)
    }

    func upgrade(context: ChannelHandlerContext, upgradeRequest: HTTPRequestHead) -> EventLoopFuture<Void> {
        context.eventLoop.makeCompletedFuture {
            try self.onUpgrade(context.channel, upgradeRequest)
        }
    }

    /// What makes `head` an upgrade request RFC 6455 (§4.1, §4.2.1) does not allow, in
    /// words; nil when it is a good one.
    static func violation(of head: HTTPRequestHead) -> String? {
        guard head.method == .GET else {
            return "the method of a WebSocket upgrade must be GET, not \(head.method.rawValue)"
        }
        guard head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1) else {
            return "a WebSocket upgrade needs HTTP/1.1 or later, not HTTP/\(head.version.major).\(head.version.minor)"
        }
        let keys = head.headers[canonicalForm: "sec-websocket-key"]
        guard keys.count == 1, let key = keys.first else {
            return "a WebSocket upgrade needs exactly one Sec-WebSocket-Key, not \(keys.count)"
        }
        guard Self.isBase64OfSixteenBytes(key.utf8) else {
            return "Sec-WebSocket-Key must be the base64 of 16 bytes (24 characters ending in ==)"
        }
        let versions = head.headers[canonicalForm: "sec-websocket-version"]
        guard versions.count == 1, versions.first == "13" else {
            return "this server speaks Sec-WebSocket-Version 13 only"
        }
        return nil
    }

    /// 16 bytes in base64 are 22 characters of its alphabet and "==".
    static func isBase64OfSixteenBytes(_ key: Substring.UTF8View) -> Bool {
        guard key.count == 24, key.suffix(2).elementsEqual("==".utf8) else { return false }
        return key.prefix(22).allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
                return true
            default:
                return false
            }
        }
    }
}
