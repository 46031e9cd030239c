import NIOCore

/// Settings of a server (`mw.listen`'s options).
///
/// ```swift
/// var options = MessageServerOptions()
/// options.protocols = ["chat.v2"]
/// options.heartbeat = .dropSilentPeers(after: .seconds(10))
/// options.tls.certificateFile = "server.pem"
/// options.tls.privateKeyFile = "server.key"
/// ```
public struct MessageServerOptions: Sendable {
    /// Subprotocols the WebSocket server accepts. The first one the client offers (in the
    /// client's order of preference) is chosen; none chosen when nothing matches.
    public var protocols: [String]
    /// Largest incoming WebSocket message (after decompression): larger ones close with
    /// 1009. TCP limits are the framing's.
    public var maxMessage: Int
    /// Accept permessage-deflate when a WebSocket client offers it.
    public var compress: Bool
    /// How `tcp://` and `tls://` streams are cut into messages.
    public var framing: TCPFraming
    /// Drops peers that stay silent; nil keeps them for ever. Use ``HeartbeatMonitor/Configuration/dropSilentPeers(after:ping:)``.
    public var heartbeat: HeartbeatMonitor.Configuration?
    /// How long to wait for a WebSocket peer's close frame after ours, and for TCP writes to
    /// drain on close, before dropping the connection.
    public var closeTimeout: TimeAmount
    /// How long a WebSocket client has, from the TCP accept, to finish the TLS handshake
    /// (`wss://`) and send a complete upgrade request; slower ones are dropped unanswered.
    public var handshakeTimeout: TimeAmount
    /// Most header fields a WebSocket upgrade request may have (Python websockets allows
    /// 128 too); a request with more gets 431 while it is being parsed, before its headers
    /// are kept anywhere. Their size is bounded too: ``maxHeaderBytes``.
    public var maxHeaders = 128
    /// Most bytes all header names and values of an upgrade request may take together
    /// (NIO's default, 80 KiB); a request with more gets 431.
    public var maxHeaderBytes = 80 * 1024
    /// The listening socket's accept queue (`backlog`); nil: the system's maximum
    /// (`net.core.somaxconn` on Linux).
    public var backlog: Int32?
    /// The certificate (`certificateFile`, `privateKeyFile`) of `wss://` and `tls://`; with
    /// `caFile`, clients must present a certificate issued by that CA.
    public var tls: TLSOptions
    /// Each peer's outbound budget (`queue.limit`, `queue.bytes`, `queue.overflow`).
    public var queueLimit = 1024
    public var queueBytes = 16 << 20
    public var overflow = SendQueue<OutboundMessage>.Overflow.error
    /// What a broadcast does to a peer that cannot take the message (`slow_peer`).
    public var slowPeer = SlowPeer.drop
    /// `auto_reply`: each peer's pings answered without reaching the delegate.
    public var autoReply: AutoReply?

    /// `slow_peer`: what happens to a peer whose budget is full when a broadcast comes.
    public enum SlowPeer: String, Sendable, Hashable, CaseIterable {
        /// It misses the message, counted in its `dropped`.
        case drop
        /// It is closed with 1008 "too slow".
        case close
    }

    /// The scripting API's defaults: no subprotocols, 16 MiB messages, no compression,
    /// line framing, no heartbeat, 5 s close timeout, 10 s handshake timeout.
    public init(
        protocols: [String] = [],
        maxMessage: Int = 16 * 1024 * 1024,
        compress: Bool = false,
        framing: TCPFraming = .line(),
        heartbeat: HeartbeatMonitor.Configuration? = nil,
        closeTimeout: TimeAmount = .seconds(5),
        handshakeTimeout: TimeAmount = .seconds(10),
        tls: TLSOptions = TLSOptions()
    ) {
        self.handshakeTimeout = handshakeTimeout
        self.protocols = protocols
        self.maxMessage = maxMessage
        self.compress = compress
        self.framing = framing
        self.heartbeat = heartbeat
        self.closeTimeout = closeTimeout
        self.tls = tls
    }
}

extension HeartbeatMonitor.Configuration {
    /// A server heartbeat that drops a peer after `timeout` without hearing anything from
    /// it. With `ping` (WebSocket only), a ping probes the peer after half of that, so an
    /// idle but healthy client stays by answering with a pong.
    ///
    /// ```swift
    /// options.heartbeat = .dropSilentPeers(after: .seconds(10))   // the Lua option heartbeat = { timeout = 10 }
    /// ```
    public static func dropSilentPeers(after timeout: TimeAmount, ping: Bool = false) -> Self {
        if ping {
            let half = TimeAmount.nanoseconds(timeout.nanoseconds / 2)
            return Self(interval: half, timeout: timeout - half, probe: .ping, watch: .inboundSilence)
        }
        return Self(interval: timeout, timeout: .zero, probe: nil, watch: .inboundSilence)
    }
}
