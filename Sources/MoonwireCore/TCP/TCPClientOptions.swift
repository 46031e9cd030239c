import NIOCore

/// Settings of a `tcp://` or `tls://` client connection: the transport part of
/// `mw.connect`'s options.
///
/// ```swift
/// var options = TCPClientOptions()
/// options.framing = .length(LengthPrefix(bytes: 2, endian: .big, max: 65_536))
/// options.tls.caFile = "ca.pem"
/// ```
public struct TCPClientOptions: Sendable {
    /// How the byte stream is cut into messages, both ways.
    public var framing: TCPFraming
    /// Time allowed for DNS, TCP and TLS together.
    public var connectTimeout: TimeAmount
    /// After `close`, how long pending writes may take to drain before the connection is
    /// dropped anyway.
    public var closeTimeout: TimeAmount
    /// TLS settings for `tls://`.
    public var tls: TLSOptions
    /// The proxy to dial through; by default the one the environment names.
    public var proxy: ProxyChoice = .environment

    /// The defaults of the scripting API: line framing, 10 s connect timeout, 5 s close
    /// timeout, system trust.
    public init(
        framing: TCPFraming = .line(),
        connectTimeout: TimeAmount = .seconds(10),
        closeTimeout: TimeAmount = .seconds(5),
        tls: TLSOptions = TLSOptions()
    ) {
        self.framing = framing
        self.connectTimeout = connectTimeout
        self.closeTimeout = closeTimeout
        self.tls = tls
    }
}
