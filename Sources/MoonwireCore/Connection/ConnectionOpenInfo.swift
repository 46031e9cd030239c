import NIOHTTP1

/// What a client connection's dial agreed on when it opened, WebSocket or TCP: for a
/// WebSocket the upgrade's subprotocol, headers and compression; for TCP only the timing.
///
/// ```swift
/// func connectionDidOpen(_ c: ClientConnection, info: ConnectionOpenInfo) {
///     if let timing = info.timing { print("open after \(timing.total)") }
/// }
/// ```
public struct ConnectionOpenInfo: Sendable {
    /// The subprotocol the server chose, if any (WebSocket).
    public var subprotocol: String? = nil
    /// The `101` response's headers (WebSocket; empty for TCP).
    public var headers: HTTPHeaders = [:]
    /// The permessage-deflate parameters, when compression was negotiated (WebSocket).
    public var compression: PerMessageDeflateParameters? = nil
    /// How long the dial's steps took (DNS, TCP, TLS, the WebSocket upgrade).
    public var timing: ConnectTiming? = nil
}
