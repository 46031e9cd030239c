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
    public var headers: [(String, String)]
    /// The `Origin` header, if any.
    public var origin: String?
    /// Subprotocols to offer, in order of preference.
    public var protocols: [String]
    /// Largest incoming message in bytes (after decompression); larger ones close with 1009.
    public var maxMessage: Int
    /// Offer permessage-deflate.
    public var compress: Bool
    /// The permessage-deflate parameters offered when `compress` is set.
    public var deflate: PerMessageDeflateOffer
    /// Split outgoing messages into frames of at most this many payload bytes; nil sends
    /// every message as one frame.
    public var fragmentSize: Int?
    /// Timeouts, TLS and proxy, as every dial has them; read as `options.tls` and so on.
    public var dial: DialOptions

    /// The defaults of the scripting API: 16 MiB messages, no compression, and
    /// ``DialOptions``' defaults.
    public init(
        headers: [(String, String)] = [],
        origin: String? = nil,
        protocols: [String] = [],
        maxMessage: Int = 16 * 1024 * 1024,
        compress: Bool = false,
        deflate: PerMessageDeflateOffer = PerMessageDeflateOffer(),
        fragmentSize: Int? = nil,
        dial: DialOptions = DialOptions()
    ) {
        self.headers = headers
        self.origin = origin
        self.protocols = protocols
        self.maxMessage = maxMessage
        self.compress = compress
        self.deflate = deflate
        self.fragmentSize = fragmentSize
        self.dial = dial
    }
}
