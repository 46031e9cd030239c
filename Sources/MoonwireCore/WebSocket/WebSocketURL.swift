import NIOCore

/// A parsed `ws://` or `wss://` URL (RFC 6455 §3).
///
/// ```swift
/// let url = try WebSocketURL("wss://[::1]:8443/chat?room=1")
/// url.host           // "::1"
/// url.port           // 8443
/// url.requestTarget  // "/chat?room=1"
/// ```
public struct WebSocketURL: Sendable, Hashable, CustomStringConvertible {
    /// True for `wss://`.
    public var secure: Bool
    /// The host name or IP literal, without IPv6 brackets.
    public var host: String
    /// The port, defaulted from the scheme (80 / 443).
    public var port: Int
    /// Path and query as sent in the request line; `/` when the URL has none.
    public var requestTarget: String
    /// `ws://user:password@host/`: sent as `Authorization: Basic`, as Python websockets
    /// and node's ws do, unless the headers have an `Authorization` of their
    /// own. Never part of ``description``.
    public var credentials: Credentials?

    /// An error naming what is wrong with a URL string.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        /// What is wrong.
        public var message: String
        /// The message.
        public var description: String { self.message }
    }

    /// Parses `string`; throws for other schemes, a missing host, a bad port, bad user info
    /// or a fragment (which RFC 6455 forbids).
    public init(_ string: String) throws(ParseError) {
        func fail(_ why: String) -> ParseError { ParseError(message: "invalid WebSocket URL '\(Credentials.redacted(string))': \(why)") }
        let scheme = try HostPort.scheme(of: string, plain: "ws", secure: "wss", fail: fail)
        self.secure = scheme.secure
        var rest = scheme.rest
        if rest.contains("#") { throw fail("fragments are not allowed") }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority: Substring
        (self.credentials, authority) = try Credentials.split(rest[..<authorityEnd], fail: fail)
        rest = rest[authorityEnd...]

        let parsed = try HostPort.parse(authority, portRange: 1...65535, fail: fail)
        self.host = parsed.host
        self.port = parsed.port ?? (self.secure ? 443 : 80)
        if rest.isEmpty {
            self.requestTarget = "/"
        } else if rest.hasPrefix("?") {
            self.requestTarget = "/" + rest
        } else {
            self.requestTarget = String(rest)
        }
    }

    /// True when the host is an IPv4 or IPv6 literal (no SNI, no DNS).
    public var hostIsIPAddress: Bool {
        (try? SocketAddress(ipAddress: self.host, port: 0)) != nil
    }

    /// The `Host` header value: brackets for IPv6, the port unless it is the scheme default.
    public var hostHeader: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        let defaultPort = self.secure ? 443 : 80
        return self.port == defaultPort ? host : "\(host):\(self.port)"
    }

    /// The URL in canonical form.
    public var description: String {
        "\(self.secure ? "wss" : "ws")://\(HostPort.format(host: self.host, port: self.port))\(self.requestTarget)"
    }
}
