import Crypto
import NIOCore
import NIOHTTP1

/// What decides an upgrade and takes the upgraded connection: ``MessageServer``.
protocol WebSocketUpgradeDelegate: AnyObject {
    /// The server's answer to a request RFC 6455 allows.
    func decide(_ request: UpgradeRequest) -> WebSocketServerHandshake.Decision
    /// After the 101 went out: adds the connection's handler right after `handshake` and
    /// announces the peer.
    func upgraded(_ channel: Channel, request: UpgradeRequest, subprotocol: String?, deflate: PerMessageDeflate?, after handshake: WebSocketServerHandshake) throws
}

/// The server's side of the HTTP/1.1 upgrade to WebSocket, the one handler of a new
/// `ws://` or `wss://` connection (after TLS) until it is upgraded: it reads the request
/// head (``UpgradeRequestParser``, bounded), holds it to what RFC 6455 §4.2.1 requires,
/// lets the server decide (``MessageServer``: shutting down, `reject_next`, the path, the
/// subprotocol, permessage-deflate), writes the `101 Switching Protocols` with
/// `Sec-WebSocket-Accept`, and puts the peer's ``WebSocketHandler`` in its own place.
/// Bytes that came after the head (a client's first frames) go to that handler.
///
/// What it refuses gets one HTTP response with a one-line plain-text body saying why,
/// then the connection closes:
/// - 400: a request HTTP/1.1 cannot parse, an upgrade RFC 6455 does not allow, or plain
///   HTTP (no `Upgrade`; it gets `Upgrade: websocket` too, saying what would be taken);
/// - 400 / 431: a request line, or header fields, beyond the bounds;
/// - the server's refusals (503 shutting down, `reject_next`'s status, 404 other paths).
///
/// It also bounds the handshake: from the moment the connection is accepted (so a TLS
/// handshake counts too) until the upgrade, `handshakeTimeout` at most; a client that is
/// slower (a slowloris sending its request a byte at a time) is dropped without an answer.
final class WebSocketServerHandshake: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// What the server made of a request RFC 6455 allows.
    enum Decision {
        case refuse(HTTPResponseStatus, String)
        /// Upgrade, with the subprotocol chosen and the permessage-deflate answer, if any.
        case accept(subprotocol: String?, deflate: (response: String, deflate: PerMessageDeflate)?)
    }

    private let server: WebSocketUpgradeDelegate
    private let deadlines: HandshakeDeadlines
    private var parser: UpgradeRequestParser
    private var context: ChannelHandlerContext?
    private var done = false
    // The handshake timeout's (``HandshakeDeadlines``): when, and the neighbours in its list.
    var timed = false
    var deadline = NIODeadline.uptimeNanoseconds(0)
    var newer: WebSocketServerHandshake?
    weak var older: WebSocketServerHandshake?

    init(server: WebSocketUpgradeDelegate, deadlines: HandshakeDeadlines, maxHeaders: Int, maxHeaderBytes: Int) {
        self.server = server
        self.deadlines = deadlines
        self.parser = UpgradeRequestParser(maxFields: maxHeaders, maxBytes: maxHeaderBytes)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.deadlines.add(self)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.deadlines.remove(self)
        self.context = nil
    }

    /// The handshake timeout passed: the client is dropped without an answer.
    func expired() {
        self.context?.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.done else { return }
        var buffer = self.unwrapInboundIn(data)
        let request: UpgradeRequest
        do {
            guard let head = try self.parser.parse(&buffer) else { return }
            request = head
        } catch {
            switch error {
            case .malformed(let why):
                self.refuse(context: context, .badRequest, "not an HTTP/1.1 request (\(why))")
            case .tooManyHeaders:
                self.refuse(context: context, .requestHeaderFieldsTooLarge,
                            "more than \(self.parser.maxFields) header fields or \(self.parser.maxBytes) bytes of them")
            case .requestLineTooLong:
                self.refuse(context: context, .badRequest, "a request line of more than \(self.parser.maxBytes) bytes")
            }
            return
        }
        let key: String
        switch Self.check(request) {
        case .refuse(let status, let reason):
            self.refuse(context: context, status, reason, head: request.method == "HEAD")
            return
        case .upgrade(let good):
            key = good
        }
        switch self.server.decide(request) {
        case .refuse(let status, let reason):
            self.refuse(context: context, status, reason)
        case .accept(let subprotocol, let deflate):
            self.upgrade(context: context, request, key: key, subprotocol: subprotocol, deflate: deflate, leftover: buffer)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    // MARK: Answers

    private func upgrade(
        context: ChannelHandlerContext, _ request: UpgradeRequest, key: String, subprotocol: String?,
        deflate: (response: String, deflate: PerMessageDeflate)?, leftover: ByteBuffer
    ) {
        self.done = true
        self.deadlines.remove(self)
        var response = context.channel.allocator.buffer(capacity: 256)
        response.writeStaticString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ")
        response.writeString(Self.acceptValue(key: key))
        if let subprotocol {
            response.writeStaticString("\r\nSec-WebSocket-Protocol: ")
            response.writeString(subprotocol)
        }
        if let deflate {
            response.writeStaticString("\r\nSec-WebSocket-Extensions: ")
            response.writeString(deflate.response)
        }
        response.writeStaticString("\r\n\r\n")
        context.writeAndFlush(self.wrapOutboundOut(response), promise: nil)
        do {
            try self.server.upgraded(context.channel, request: request, subprotocol: subprotocol, deflate: deflate?.deflate, after: self)
        } catch {
            context.close(promise: nil)
            return
        }
        // The peer's handler is in place, after this one: it takes the frames that came
        // with the head, then this handler leaves.
        if leftover.readableBytes > 0 {
            context.fireChannelRead(self.wrapInboundOut(leftover))
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    /// Writes the one response this connection gets, with `reason` as its body (none for
    /// HEAD), and closes.
    private func refuse(context: ChannelHandlerContext, _ status: HTTPResponseStatus, _ reason: String, head: Bool = false) {
        self.done = true
        self.deadlines.remove(self)
        let body = reason + "\n"
        var text = "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n"
        text += "Content-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n"
        if reason == Self.plainHTTPReason { text += "Upgrade: websocket\r\n" }
        if status == .badRequest && reason == Self.versionReason { text += "Sec-WebSocket-Version: 13\r\n" }
        text += "\r\n"
        if !head { text += body }
        context.writeAndFlush(self.wrapOutboundOut(context.channel.allocator.buffer(string: text))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    // MARK: RFC 6455

    /// `Sec-WebSocket-Accept` for `key` (RFC 6455 §4.2.2): base64 of the SHA-1 of the key
    /// and the protocol's GUID.
    static func acceptValue(key: String) -> String {
        var sha1 = Insecure.SHA1()
        sha1.update(data: Array(key.utf8))
        sha1.update(data: Self.guid)
        return sha1.finalize().withUnsafeBytes { BinaryText.base64($0) }
    }

    private static let guid = Array("258EAFA5-E914-47DA-95CA-C5AB0DC85B11".utf8)
    private static let versionReason = "this server speaks Sec-WebSocket-Version 13 only"
    private static let plainHTTPReason = "this is a WebSocket server: send a GET with Upgrade: websocket"

    /// What RFC 6455 (§4.1, §4.2.1) makes of a request: its key, or the answer to a
    /// request that is not an upgrade it allows, in words.
    enum Check: Equatable {
        case upgrade(key: String)
        case refuse(HTTPResponseStatus, String)
    }

    /// Holds `request` to RFC 6455, reading its header fields once.
    static func check(_ request: UpgradeRequest) -> Check {
        var upgrades = 0, upgradeToWebSocket = false, connectionUpgrade = false
        var hosts = 0, keys = 0, versions = 0
        var key = "", version = ""
        for (name, value) in request.headers {
            // The names that matter have different lengths: the length picks the one to compare.
            switch name.utf8.count {
            case 4 where Self.token(name.utf8, is: "host"):
                hosts += 1
            case 7 where Self.token(name.utf8, is: "upgrade"):
                upgrades += 1
                if Self.list(value, contains: "websocket") { upgradeToWebSocket = true }
            case 10 where Self.token(name.utf8, is: "connection"):
                if Self.list(value, contains: "upgrade") { connectionUpgrade = true }
            case 17 where Self.token(name.utf8, is: "sec-websocket-key"):
                keys += 1
                key = value
            case 21 where Self.token(name.utf8, is: "sec-websocket-version"):
                versions += 1
                version = value
            default:
                break
            }
        }
        guard upgrades > 0 else {
            return .refuse(.badRequest, Self.plainHTTPReason)
        }
        guard upgradeToWebSocket else {
            return .refuse(.badRequest, "not a WebSocket upgrade this server can take (RFC 6455 section 4.2.1)")
        }
        guard connectionUpgrade else {
            return .refuse(.badRequest, "a WebSocket upgrade needs Connection: Upgrade")
        }
        guard request.method == "GET" else {
            return .refuse(.badRequest, "the method of a WebSocket upgrade must be GET, not \(request.method)")
        }
        let httpVersion = request.version
        guard httpVersion.major > 1 || (httpVersion.major == 1 && httpVersion.minor >= 1) else {
            return .refuse(.badRequest, "a WebSocket upgrade needs HTTP/1.1 or later, not HTTP/\(httpVersion.major).\(httpVersion.minor)")
        }
        guard hosts == 1 else {
            return .refuse(.badRequest, "a WebSocket upgrade needs exactly one Host, not \(hosts)")
        }
        guard keys == 1 else {
            return .refuse(.badRequest, "a WebSocket upgrade needs exactly one Sec-WebSocket-Key, not \(keys)")
        }
        guard Self.isBase64OfSixteenBytes(key[...].utf8) else {
            return .refuse(.badRequest, "Sec-WebSocket-Key must be the base64 of 16 bytes (24 characters ending in ==)")
        }
        guard versions == 1, version == "13" else {
            return .refuse(.badRequest, Self.versionReason)
        }
        return .upgrade(key: key)
    }

    /// True when the comma-separated `list` (RFC 9110 §5.6.1) has `token`, in any case.
    private static func list(_ list: String, contains token: StaticString) -> Bool {
        list.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true).contains { element in
            var element = element
            while let first = element.first, first == 0x20 || first == 0x09 { element = element.dropFirst() }
            while let last = element.last, last == 0x20 || last == 0x09 { element = element.dropLast() }
            return Self.token(element, is: token)
        }
    }

    /// An ASCII case-insensitive comparison with a lower-case `token` (RFC 9110 §7.8, §7.6.1).
    private static func token<Bytes: Collection<UInt8>>(_ value: Bytes, is token: StaticString) -> Bool {
        let lower = UnsafeRawBufferPointer(start: token.utf8Start, count: token.utf8CodeUnitCount)
        return value.elementsEqual(lower) { byte, expected in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == expected : byte == expected
        }
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
