import NIOHTTP1

/// What a server knows about a peer when it connects: the `request` of `on_connect`.
///
/// ```swift
/// func server(_ s: MessageServer, didConnect peer: ServerPeer, request: ServerPeerRequest) {
///     if request.headers["Authorization"].first != "Bearer t0k3n" { try? peer.close(code: 4001, reason: "unauthorized") }
/// }
/// ```
public struct ServerPeerRequest: Sendable {
    /// The request target of the WebSocket handshake (`/chat?room=1`); empty for TCP.
    public var path: String
    /// The handshake's headers (at most ``MessageServerOptions/maxHeaders``); empty for TCP,
    /// and in ``ServerPeer/request``, which does not keep them.
    public var headers: HTTPHeaders
    /// The subprotocol chosen, if any.
    public var subprotocol: String?
    /// The peer's address, `ip:port`.
    public var remoteAddress: String
}
