import Foundation
import NIOCore
import NIOHTTP1

/// Sends the upgrade request once the transport is up and reports why a handshake did not
/// succeed: a non-101 response (NIO's upgrade handler passes those through), an error, or
/// the connection closing first. Removed from the pipeline when the upgrade succeeds.
///
/// A refusal's body often says why (Python websockets: `HTTP 400 Bad Request: Failed to
/// open a WebSocket connection: missing subprotocol.`), so its first line is part of the
/// error when it came with the status line: the refusal is reported at the end of the
/// response or of the read that brought its head, whichever is first, never later.
final class WebSocketHandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let request: HTTPRequestHead
    private let onFailure: (Error) -> Void
    private var sent = false
    /// A non-101 response being read.
    private var refusal: Refusal?

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
        switch self.unwrapInboundIn(data) {
        case .head(let response):
            self.refusal = Refusal(status: Int(response.status.code), reason: response.status.reasonPhrase)
        case .body(let part):
            self.refusal?.append(part)
        case .end:
            self.refuse(context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.refuse(context: context)
        context.fireChannelReadComplete()
    }

    private func refuse(context: ChannelHandlerContext) {
        guard let refusal = self.refusal.take() else { return }
        self.onFailure(ConnectionError.handshake(refusal.message, status: refusal.status))
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A body that does not parse (bad chunking) after a refusal's head: the status wins.
        self.refuse(context: context)
        self.onFailure(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.refuse(context: context)
        self.onFailure(ConnectionError.handshake("connection closed during the handshake"))
        context.fireChannelInactive()
    }
}

/// A refused upgrade's status line and the start of its body.
struct Refusal {
    /// Body bytes kept: enough for a line of explanation.
    static let bodyLimit = 1024
    /// Characters of the body's line shown at most.
    static let lineLimit = 200

    let status: Int
    let reason: String
    private(set) var body: [UInt8] = []

    init(status: Int, reason: String) {
        self.status = status
        self.reason = reason
    }

    mutating func append(_ part: ByteBuffer) {
        let room = Self.bodyLimit - self.body.count
        guard room > 0 else { return }
        self.body += part.readableBytesView.prefix(room)
    }

    /// `HTTP 403 Forbidden`, then `: ` and the body's first line when it says more.
    var message: String {
        let status = self.reason.isEmpty ? "HTTP \(self.status)" : "HTTP \(self.status) \(self.reason)"
        guard let line = self.explanation else { return status }
        return status + ": " + line
    }

    /// The body's first non-empty line, when it is UTF-8 text that is not markup (an HTML
    /// error page) and not just the reason phrase again (node's ws sends that); printable
    /// (``TerminalText``), at most ``lineLimit`` characters.
    var explanation: String? {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        let rest = self.body.drop(while: isSpace)
        var bytes = rest.prefix { $0 != 0x0D && $0 != 0x0A }
        // A line cut by bodyLimit may end inside a character: drop its first bytes.
        if bytes.count == rest.count, self.body.count == Self.bodyLimit {
            while let last = bytes.last, last & 0xC0 == 0x80 { bytes = bytes.dropLast() }
            if let last = bytes.last, last >= 0xC0 { bytes = bytes.dropLast() }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let line = text.trimmingCharacters(in: .whitespaces)
        guard !line.isEmpty, !line.hasPrefix("<"), line.lowercased() != self.reason.lowercased() else { return nil }
        let shown = TerminalText.printable(line)
        return shown.count > Self.lineLimit ? String(shown.prefix(Self.lineLimit)) + "…" : shown
    }
}
