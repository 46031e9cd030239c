import NIOCore
import NIOHTTP1
import NIOWebSocket

/// What the upgrade decision left for the HTTP fallback: the status to refuse with.
final class HandshakeGate {
    /// Set when the server refused the upgrade on purpose (reject_next, unknown path).
    var refusal: HTTPResponseStatus?
    /// The compression agreed in the upgrade response.
    var deflate: PerMessageDeflate?
    /// The subprotocol agreed.
    var subprotocol: String?
}

/// Answers the requests the WebSocket upgrader did not take: a refusal decided by the
/// server (`reject_next`, a path not served), a malformed upgrade (400) or plain HTTP
/// (426 Upgrade Required), then closes the connection.
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
    private var deadline: Scheduled<Void>?
    private var isUpgrade = false

    init(gate: HandshakeGate, handshakeTimeout: TimeAmount) {
        self.gate = gate
        self.handshakeTimeout = handshakeTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.deadline = context.eventLoop.assumeIsolated().scheduleTask(in: self.handshakeTimeout) {
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
            let status = self.gate.refusal ?? (self.isUpgrade ? .badRequest : .upgradeRequired)
            var headers = HTTPHeaders()
            headers.add(name: "Content-Length", value: "0")
            headers.add(name: "Connection", value: "close")
            if status == .upgradeRequired { headers.add(name: "Upgrade", value: "websocket") }
            context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            self.deadline?.cancel()
            context.writeAndFlush(self.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A refused or malformed upgrade is reported here before the request itself; the
        // response goes out at its end. Anything else ends the connection.
        if error is NIOWebSocketUpgradeError { return }
        context.close(promise: nil)
    }
}
