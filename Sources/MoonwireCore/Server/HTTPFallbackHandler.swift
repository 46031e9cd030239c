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
final class HTTPFallbackHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let gate: HandshakeGate
    private var isUpgrade = false
    private var sawUpgradeError = false

    init(gate: HandshakeGate) {
        self.gate = gate
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
