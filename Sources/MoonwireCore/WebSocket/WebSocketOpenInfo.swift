import NIOHTTP1

/// What the server agreed to when the connection opened (empty for TCP but the timing).
public struct WebSocketOpenInfo: Sendable {
    /// The subprotocol the server chose, if any.
    public var subprotocol: String?
    /// The `101` response's headers.
    public var headers: HTTPHeaders
    /// The permessage-deflate parameters, when compression was negotiated.
    public var compression: PerMessageDeflateParameters?
    /// How long the dial's steps took (DNS, TCP, TLS, the upgrade).
    public var timing: ConnectTiming?
}
