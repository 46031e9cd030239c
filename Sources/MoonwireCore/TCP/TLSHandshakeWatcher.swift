import NIOCore
import NIOSSL
import NIOTLS

/// Reports once whether the TLS handshake of a dial completed, so a `tls://` connection
/// opens only when it can carry data, and a failure is a `tls` dial error.
final class TLSHandshakeWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private var callback: ((Result<Void, Error>) -> Void)?

    init(_ callback: @escaping (Result<Void, Error>) -> Void) {
        self.callback = callback
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            self.finish(.success(()))
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.finish(.failure(error))
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.finish(.failure(ConnectionError(step: .tls, message: "connection closed during the TLS handshake")))
        context.fireChannelInactive()
    }

    private func finish(_ result: Result<Void, Error>) {
        let callback = self.callback
        self.callback = nil
        callback?(result)
    }
}
