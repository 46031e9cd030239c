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
public struct WebSocketClientOptions: Sendable {
    /// Extra handshake headers, sent in order. A `Host` here replaces the one from the URL.
    public var headers: [(String, String)]
    /// The `Origin` header, if any.
    public var origin: String?
    /// Subprotocols to offer, in order of preference.
    public var protocols: [String]
    /// Time allowed for DNS, TCP, TLS and the HTTP upgrade together.
    public var connectTimeout: TimeAmount
    /// Largest incoming message in bytes (after decompression); larger ones close with 1009.
    public var maxMessage: Int
    /// How long to wait for the peer's close frame after sending ours, and for the server to
    /// end TCP after the close handshake, before dropping the connection.
    public var closeTimeout: TimeAmount
    /// Offer permessage-deflate.
    public var compress: Bool
    /// The permessage-deflate parameters offered when `compress` is set.
    public var deflate: PerMessageDeflateOffer
    /// TLS settings for `wss://`.
    public var tls: TLSOptions
    /// Split outgoing messages into frames of at most this many payload bytes; nil sends
    /// every message as one frame.
    public var fragmentSize: Int?
    /// The proxy to dial through; by default the one the environment names.
    public var proxy: ProxyChoice = .environment

    /// The defaults of the scripting API: 10 s connect timeout, 16 MiB messages, 5 s close
    /// timeout, no compression, system trust.
    public init(
        headers: [(String, String)] = [],
        origin: String? = nil,
        protocols: [String] = [],
        connectTimeout: TimeAmount = .seconds(10),
        maxMessage: Int = 16 * 1024 * 1024,
        closeTimeout: TimeAmount = .seconds(5),
        compress: Bool = false,
        deflate: PerMessageDeflateOffer = PerMessageDeflateOffer(),
        tls: TLSOptions = TLSOptions(),
        fragmentSize: Int? = nil
    ) {
        self.headers = headers
        self.origin = origin
        self.protocols = protocols
        self.connectTimeout = connectTimeout
        self.maxMessage = maxMessage
        self.closeTimeout = closeTimeout
        self.compress = compress
        self.deflate = deflate
        self.tls = tls
        self.fragmentSize = fragmentSize
    }
}
