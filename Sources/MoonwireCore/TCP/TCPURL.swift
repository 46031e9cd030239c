import NIOCore

/// A parsed `tcp://host:port` or `tls://host:port` URL. The port is required; a path is
/// not allowed (a bare trailing `/` is tolerated).
///
/// ```swift
/// let url = try TCPURL("tls://[::1]:7000")
/// url.secure   // true
/// url.host     // "::1"
/// ```
public struct TCPURL: Sendable, Hashable, CustomStringConvertible {
    /// True for `tls://`.
    public var secure: Bool
    /// Host name or IP literal, without IPv6 brackets.
    public var host: String
    /// The port.
    public var port: Int

    /// Parses `string`.
    public init(_ string: String) throws(WebSocketURL.ParseError) {
        func fail(_ why: String) -> WebSocketURL.ParseError {
            WebSocketURL.ParseError(message: "invalid TCP URL '\(string)': \(why)")
        }
        let scheme = try HostPort.scheme(of: string, plain: "tcp", secure: "tls", fail: fail)
        self.secure = scheme.secure
        var authority = scheme.rest
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        if authority.contains("/") || authority.contains("?") || authority.contains("#") {
            throw fail("a TCP URL has no path")
        }
        let parsed = try HostPort.parse(authority, portRange: 1...65535, fail: fail)
        guard let port = parsed.port else { throw fail("a port is required") }
        self.host = parsed.host
        self.port = port
    }

    /// Creates a URL from its parts.
    public init(secure: Bool, host: String, port: Int) {
        self.secure = secure
        self.host = host
        self.port = port
    }

    /// True when the host is an IPv4 or IPv6 literal (no SNI).
    public var hostIsIPAddress: Bool {
        (try? SocketAddress(ipAddress: self.host, port: 0)) != nil
    }

    /// `host:port` for messages.
    public var hostPort: String { HostPort.format(host: self.host, port: self.port) }

    /// The URL in canonical form.
    public var description: String { "\(self.secure ? "tls" : "tcp")://\(self.hostPort)" }
}
