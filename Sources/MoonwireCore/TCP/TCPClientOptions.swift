import NIOCore

/// Settings of a `tcp://` or `tls://` client connection: the transport part of
/// `mw.connect`'s options.
///
/// ```swift
/// var options = TCPClientOptions()
/// options.framing = .length(LengthPrefix(bytes: 2, endian: .big, max: 65_536))
/// options.tls.caFile = "ca.pem"
/// ```
public struct TCPClientOptions: DialOptionsCarrier, Sendable {
    /// How the byte stream is cut into messages, both ways.
    public var framing: TCPFraming
    /// Timeouts, TLS and proxy, as every dial has them; read as `options.tls` and so on.
    public var dial: DialOptions

    /// The defaults of the scripting API: line framing, and ``DialOptions``' defaults.
    public init(framing: TCPFraming = .line(), dial: DialOptions = DialOptions()) {
        self.framing = framing
        self.dial = dial
    }
}
