import NIOCore
import NIOHTTP1
import NIOWebSocket

/// What the upgrade decision left for the HTTP fallback: the status to refuse with.
final class HandshakeGate {
    /// Set when the server refused the upgrade (a broken request, reject_next, a path not
    /// served), with the reason the response's body gives.
    private(set) var refusal: (status: HTTPResponseStatus, reason: String)?
    /// The compression agreed in the upgrade response.
    var deflate: PerMessageDeflate?
    /// The subprotocol agreed.
    var subprotocol: String?

    func refuse(_ status: HTTPResponseStatus, _ reason: String) {
        self.refusal = (status, reason)
    }
}

/// Answers the requests the WebSocket upgrader did not take: a refusal decided by the
/// server (a request RFC 6455 does not allow, `reject_next`, a path not served), a
/// request HTTP/1.1 cannot parse (400) or whose headers are too many or too large (431),
/// or plain HTTP (426 Upgrade Required), then closes the connection. Each answer has a
/// one-line plain-text body saying why.
///
/// It also bounds the handshake: from the moment the connection is accepted (so a TLS
/// handshake counts too) until the upgrade removes this handler, `handshakeTimeout` at
/// most; a client that is slower (a slowloris sending its request a byte at a time) is
/// dropped without an answer.
final class HTTPFallbackHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let gate: HandshakeGate
    private let handshakeTimeout: TimeAmount
    private let limits: NIOHTTPDecoderLimitConfiguration
    private var deadline: ClockTask?
    private var isUpgrade = false
    private var answered = false

    init(gate: HandshakeGate, handshakeTimeout: TimeAmount, limits: NIOHTTPDecoderLimitConfiguration) {
        self.gate = gate
        self.handshakeTimeout = handshakeTimeout
        self.limits = limits
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
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.isUpgrade = head.headers.contains(name: "upgrade")
        case .body:
            break
        case .end:
            if let refusal = self.gate.refusal {
                self.answer(context: context, status: refusal.status, reason: refusal.reason)
            } else if self.isUpgrade {
                self.answer(context: context, status: .badRequest, reason: "not a WebSocket upgrade this server can take (RFC 6455 section 4.2.1)")
            } else {
                self.answer(context: context, status: .upgradeRequired, reason: "this is a WebSocket server: send a GET with Upgrade: websocket")
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A refused or malformed upgrade is reported here before the request itself; the
        // response goes out at its end.
        if error is NIOWebSocketUpgradeError { return }
        // The request could not be parsed: say why, as far as nothing was answered yet
        // (the decoder closes the connection right after this).
        if let error = error as? HTTPParserError {
            if error == .headerOverflow {
                let reason = "more than \(self.limits.maxHeaderFieldCount) header fields or \(self.limits.maxHeaderListSize) bytes of them"
                self.answer(context: context, status: .requestHeaderFieldsTooLarge, reason: reason)
            } else {
                self.answer(context: context, status: .badRequest, reason: "not an HTTP/1.1 request (\(error))")
            }
            return
        }
        // Anything else ends the connection.
        context.close(promise: nil)
    }

    /// Writes the one response this connection gets, with `reason` as its body, and closes.
    private func answer(context: ChannelHandlerContext, status: HTTPResponseStatus, reason: String) {
        guard !self.answered else { return context.close(promise: nil) }
        self.answered = true
        self.deadline?.cancel()
        let body = ByteBuffer(string: reason + "\n")
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        headers.add(name: "Connection", value: "close")
        if status == .upgradeRequired { headers.add(name: "Upgrade", value: "websocket") }
        context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}
