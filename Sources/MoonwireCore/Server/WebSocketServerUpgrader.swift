import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The server's side of the HTTP/1.1 upgrade to WebSocket. NIO's
/// ``NIOWebSocketServerUpgrader`` checks the key and version and computes
/// `Sec-WebSocket-Accept`; this wrapper then installs moonwire's own frame handling (the
/// same streaming parser and assembler the client runs, in the server role) instead of
/// NIO's whole-frame decoder and encoder.
final class WebSocketServerUpgrader: HTTPServerProtocolUpgrader {
    private let nio: NIOWebSocketServerUpgrader
    private let onUpgrade: (Channel, HTTPRequestHead) throws -> Void

    var supportedProtocol: String { self.nio.supportedProtocol }
    var requiredUpgradeHeaders: [String] { self.nio.requiredUpgradeHeaders }

    init(
        shouldUpgrade: @escaping @Sendable (Channel, HTTPRequestHead) -> EventLoopFuture<HTTPHeaders?>,
        onUpgrade: @escaping (Channel, HTTPRequestHead) throws -> Void
    ) {
        // NIO only calls this closure from its own upgrade(), which we never forward to.
        self.nio = NIOWebSocketServerUpgrader(
            automaticErrorHandling: false,
            shouldUpgrade: shouldUpgrade,
            upgradePipelineHandler: { channel, _ in channel.eventLoop.makeSucceededVoidFuture() }
        )
        self.onUpgrade = onUpgrade
    }

    func buildUpgradeResponse(channel: Channel, upgradeRequest: HTTPRequestHead, initialResponseHeaders: HTTPHeaders) -> EventLoopFuture<HTTPHeaders> {
        self.nio.buildUpgradeResponse(channel: channel, upgradeRequest: upgradeRequest, initialResponseHeaders: initialResponseHeaders)
    }

    func upgrade(context: ChannelHandlerContext, upgradeRequest: HTTPRequestHead) -> EventLoopFuture<Void> {
        context.eventLoop.makeCompletedFuture {
            try self.onUpgrade(context.channel, upgradeRequest)
        }
    }
}
