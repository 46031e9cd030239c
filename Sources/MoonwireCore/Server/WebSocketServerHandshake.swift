import Crypto
import NIOCore
import NIOHTTP1

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
/// - 400: a request HTTP/1.1 cannot parse, or an upgrade RFC 6455 does not allow;
/// - 414 / 431: a request line, or header fields, beyond the bounds;
/// - 426 Upgrade Required: plain HTTP, without `Upgrade`;
/// - the server's refusals (503 shutting down, `reject_next`'s status, 404 other paths).
///
/// It also bounds the handshake: from the moment the connection is accepted (so a TLS
/// handshake counts too) until the upgrade, `handshakeTimeout` at most; a client that is
/// slower (a slowloris sending its request a byte at a time) is dropped without an answer.
/// What decides an upgrade and takes the upgraded connection: ``MessageServer``.
protocol WebSocketUpgradeDelegate: AnyObject {
    /// The server's answer to a request RFC 6455 allows.
    func decide(_ request: UpgradeRequest) -> WebSocketServerHandshake.Decision
    /// After the 101 went out: adds the connection's handler right after `handshake` and
    /// announces the peer.
    func upgraded(_ channel: Channel, request: UpgradeRequest, subprotocol: String?, deflate: PerMessageDeflate?, after handshake: WebSocketServerHandshake) throws
}

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
    private let handshakeTimeout: TimeAmount
    private var parser: UpgradeRequestParser
    private var deadline: ClockTask?
    private var done = false

    init(server: WebSocketUpgradeDelegate, handshakeTimeout: TimeAmount, maxHeaders: Int, maxHeaderBytes: Int) {
        self.server = server
        self.handshakeTimeout = handshakeTimeout
        self.parser = UpgradeRequestParser(maxFields: maxHeaders, maxBytes: maxHeaderBytes)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.deadline = RuntimeClock.of(context.eventLoop).scheduleTask(on: context.eventLoop, in: self.handshakeTimeout) {
            context.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.deadline?.cancel()
        self.deadline = nil
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
                self.refuse(context: context, .uriTooLong, "a request line of more than \(self.parser.maxBytes) bytes")
            }
            return
        }
        let decision: Decision
        if let (status, reason) = Self.refusal(of: request) {
            decision = .refuse(status, reason)
        } else {
            decision = self.server.decide(request)
        }
        switch decision {
        case .refuse(let status, let reason):
            self.refuse(context: context, status, reason, head: request.method == "HEAD")
        case .accept(let subprotocol, let deflate):
            self.upgrade(context: context, request, subprotocol: subprotocol, deflate: deflate, leftover: buffer)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    // MARK: Answers

    private func upgrade(
        context: ChannelHandlerContext, _ request: UpgradeRequest, subprotocol: String?,
        deflate: (response: String, deflate: PerMessageDeflate)?, leftover: ByteBuffer
    ) {
        self.done = true
        self.deadline?.cancel()
        self.deadline = nil
        // Checked by refusal(of:): exactly one key.
        let key = request.headers.first(name: "sec-websocket-key") ?? ""
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
        self.deadline?.cancel()
        self.deadline = nil
        let body = reason + "\n"
        var text = "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n"
        text += "Content-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n"
        if status == .upgradeRequired { text += "Upgrade: websocket\r\n" }
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

    /// The answer to a request that is not a WebSocket upgrade RFC 6455 (§4.1, §4.2.1)
    /// allows, in words; nil for a good one.
    static func refusal(of request: UpgradeRequest) -> (HTTPResponseStatus, String)? {
        let headers = request.headers
        let upgrade = headers[canonicalForm: "upgrade"]
        guard !upgrade.isEmpty else {
            return (.upgradeRequired, "this is a WebSocket server: send a GET with Upgrade: websocket")
        }
        guard upgrade.contains(where: { Self.token($0, is: "websocket") }) else {
            return (.badRequest, "not a WebSocket upgrade this server can take (RFC 6455 section 4.2.1)")
        }
        guard headers[canonicalForm: "connection"].contains(where: { Self.token($0, is: "upgrade") }) else {
            return (.badRequest, "a WebSocket upgrade needs Connection: Upgrade")
        }
        guard request.method == "GET" else {
            return (.badRequest, "the method of a WebSocket upgrade must be GET, not \(request.method)")
        }
        let version = request.version
        guard version.major > 1 || (version.major == 1 && version.minor >= 1) else {
            return (.badRequest, "a WebSocket upgrade needs HTTP/1.1 or later, not HTTP/\(version.major).\(version.minor)")
        }
        let hosts = headers["host"]
        guard hosts.count == 1 else {
            return (.badRequest, "a WebSocket upgrade needs exactly one Host, not \(hosts.count)")
        }
        let keys = headers[canonicalForm: "sec-websocket-key"]
        guard keys.count == 1, let key = keys.first else {
            return (.badRequest, "a WebSocket upgrade needs exactly one Sec-WebSocket-Key, not \(keys.count)")
        }
        guard Self.isBase64OfSixteenBytes(key.utf8) else {
            return (.badRequest, "Sec-WebSocket-Key must be the base64 of 16 bytes (24 characters ending in ==)")
        }
        let versions = headers[canonicalForm: "sec-websocket-version"]
        guard versions.count == 1, versions.first == "13" else {
            return (.badRequest, Self.versionReason)
        }
        return nil
    }

    /// An ASCII case-insensitive comparison with a lower-case `token` (RFC 9110 §7.8, §7.6.1).
    private static func token(_ value: Substring, is token: StaticString) -> Bool {
        let lower = UnsafeRawBufferPointer(start: token.utf8Start, count: token.utf8CodeUnitCount)
        return value.utf8.elementsEqual(lower) { byte, expected in
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
