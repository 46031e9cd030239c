import NIOCore
import NIOHTTP1

/// Sends the upgrade request once the transport is up and reports why a handshake did not
/// succeed: a non-101 response (NIO's upgrade handler passes those through), an error, or
/// the connection closing first. Removed from the pipeline when the upgrade succeeds.
final class WebSocketHandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let request: HTTPRequestHead
    private let onFailure: (Error) -> Void
    private var sent = false

    init(request: HTTPRequestHead, onFailure: @escaping (Error) -> Void) {
        self.request = request
        self.onFailure = onFailure
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { self.sendRequest(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.sendRequest(context: context)
        context.fireChannelActive()
    }

    private func sendRequest(context: ChannelHandlerContext) {
        guard !self.sent else { return }
        self.sent = true
        context.write(self.wrapOutboundOut(.head(self.request)), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let response) = self.unwrapInboundIn(data) {
            let status = Int(response.status.code)
            let reason = response.status.reasonPhrase
            let message = reason.isEmpty ? "HTTP \(status)" : "HTTP \(status) \(reason)"
            self.onFailure(ConnectionError.handshake(message, status: status))
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.onFailure(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.onFailure(ConnectionError.handshake("connection closed during the handshake"))
        context.fireChannelInactive()
    }
}
