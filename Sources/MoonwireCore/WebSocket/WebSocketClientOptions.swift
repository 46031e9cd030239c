import NIOCore

/// Settings of a WebSocket client connection; the `opts` of `mw.connect` that belong to
/// the transport. Heartbeat, reconnection and queueing live above this layer.
///
/// ```swift
/// var options = WebSocketClientOptions()
/// options.protocols = ["chat.v2"]
/// options.headers = [("Authorization", "Bearer t0k3n")]
/// options.compress = true
/// ```
public struct WebSocketClientOptions: DialOptionsCarrier, Sendable {
    /// Extra handshake headers, sent in order. A `Host` here replaces the one from the URL.
    public var headers: [(String, String)] = []
    /// The `Origin` header, if any.
    public var origin: String?
    /// Subprotocols to offer, in order of preference.
    public var protocols: [String] = []
    /// Largest incoming message in bytes (after decompression); larger ones close with 1009.
    public var maxMessage = 16 * 1024 * 1024
    /// Offer permessage-deflate.
    public var compress = false
    /// The permessage-deflate parameters offered when `compress` is set.
    public var deflate = PerMessageDeflateOffer()
    /// Split outgoing messages into frames of at most this many payload bytes; nil sends
    /// every message as one frame.
    public var fragmentSize: Int?
    /// Timeouts, TLS and proxy, as every dial has them; read as `options.tls` and so on.
    public var dial: DialOptions

    /// The defaults of the scripting API (each field's above: 16 MiB messages, no
    /// compression) with `dial`'s timeouts, TLS and proxy.
    public init(dial: DialOptions = DialOptions()) {
        self.dial = dial
    }
}
