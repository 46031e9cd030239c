import NIOCore
import NIOHTTP1
import NIOWebSocket

/// What the server agreed to in its `101 Switching Protocols`.
struct WebSocketNegotiation {
    var subprotocol: String?
    var deflate: PerMessageDeflateParameters?
}

/// The HTTP/1.1 upgrade to WebSocket. NIO's ``NIOWebSocketClientUpgrader`` makes the key
/// and the version header and checks `Sec-WebSocket-Accept`; this wrapper adds the subprotocol and extension
/// offers, checks the server's answers to them, keeps a readable reason when it refuses
/// the upgrade, and installs our own frame handling instead of NIO's whole-frame decoder
/// (which cannot reject an invalid text message before its last byte has arrived).
final class WebSocketClientUpgrader: NIOHTTPClientProtocolUpgrader {
    let supportedProtocol = "websocket"
    let requiredUpgradeHeaders: [String] = []

    private let nio: NIOWebSocketClientUpgrader
    private let protocols: [String]
    private let deflateOffer: PerMessageDeflateOffer?
    private let onUpgrade: (ChannelHandlerContext, HTTPResponseHead, WebSocketNegotiation) throws -> Void
    /// Why `shouldAllowUpgrade` said no.
    private(set) var rejection: ConnectionError?
    private var negotiation = WebSocketNegotiation()

    init(
        protocols: [String],
        deflateOffer: PerMessageDeflateOffer?,
        onUpgrade: @escaping (ChannelHandlerContext, HTTPResponseHead, WebSocketNegotiation) throws -> Void
    ) {
        let key = NIOWebSocketClientUpgrader.randomRequestKey()
        // NIO only calls this closure from its own upgrade(), which we never forward to.
        self.nio = NIOWebSocketClientUpgrader(requestKey: key, upgradePipelineHandler: { channel, _ in
            channel.eventLoop.makeSucceededVoidFuture()
        })
        self.protocols = protocols
        self.deflateOffer = deflateOffer
        self.onUpgrade = onUpgrade
    }

    func addCustom(upgradeRequestHeaders headers: inout HTTPHeaders) {
        self.nio.addCustom(upgradeRequestHeaders: &headers)
        if !self.protocols.isEmpty {
            headers.add(name: "Sec-WebSocket-Protocol", value: self.protocols.joined(separator: ", "))
        }
        if let offer = self.deflateOffer {
            headers.add(name: "Sec-WebSocket-Extensions", value: offer.headerValue)
        }
    }

    func shouldAllowUpgrade(upgradeResponse: HTTPResponseHead) -> Bool {
        guard self.nio.shouldAllowUpgrade(upgradeResponse: upgradeResponse) else {
            self.rejection = .handshake("invalid Sec-WebSocket-Accept", status: 101)
            return false
        }
        let chosen = upgradeResponse.headers["Sec-WebSocket-Protocol"]
        if chosen.count > 1 || (chosen.count == 1 && !self.protocols.contains(chosen[0])) {
            let offered = self.protocols.isEmpty ? "none" : self.protocols.joined(separator: ", ")
            self.rejection = .handshake("server chose subprotocol '\(chosen.joined(separator: ", "))', offered: \(offered)", status: 101)
            return false
        }
        self.negotiation.subprotocol = chosen.first
        let extensions = upgradeResponse.headers["Sec-WebSocket-Extensions"]
        do throws(ConnectionError) {
            if let offer = self.deflateOffer {
                self.negotiation.deflate = try offer.accept(extensions)
            } else if !extensions.isEmpty {
                throw .handshake("server enabled extensions we did not offer: \(extensions.joined(separator: ", "))")
            }
        } catch {
            self.rejection = ConnectionError(step: .handshake, message: error.message, httpStatus: 101)
            return false
        }
        return true
    }

    /// Words a failure of the upgrade itself (refused, or a response that is not HTTP);
    /// nil for the dial's other errors. `rejection`: why the upgrader said no, if it did.
    static func handshakeFailure(_ error: Error, rejection: ConnectionError?) -> ConnectionError? {
        switch error {
        case let error as NIOHTTPClientUpgradeError:
            if error == .upgraderDeniedUpgrade, let rejection {
                return rejection
            }
            if error == .responseProtocolNotFound {
                return .handshake("101 response without Upgrade: websocket", status: 101)
            }
            return .handshake("upgrade failed (\(error))")
        case let error as HTTPParserError:
            return .handshake("malformed HTTP response (\(error))")
        default:
            return nil
        }
    }

    func upgrade(context: ChannelHandlerContext, upgradeResponse: HTTPResponseHead) -> EventLoopFuture<Void> {
        do {
            try self.onUpgrade(context, upgradeResponse, self.negotiation)
            return context.eventLoop.makeSucceededVoidFuture()
        } catch {
            return context.eventLoop.makeFailedFuture(error)
        }
    }
}
