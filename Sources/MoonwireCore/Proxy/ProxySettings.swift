/// A proxy a client connection goes through: an HTTP proxy (a `CONNECT` tunnel, with
/// optional basic authentication) or a SOCKS5 proxy (no authentication).
///
/// ```swift
/// let proxy = try ProxySettings("http://ann:s3cret@127.0.0.1:3128")
/// proxy.kind        // .http
/// proxy.hostPort    // "127.0.0.1:3128"
/// ```
public struct ProxySettings: Sendable, Hashable, CustomStringConvertible {
    /// The protocol spoken to the proxy.
    public enum Kind: String, Sendable, Hashable {
        /// `http://`: an HTTP/1.1 `CONNECT` tunnel.
        case http
        /// `socks5://` (or `socks5h://`): a SOCKS5 `CONNECT`; the target's name is
        /// resolved by the proxy.
        case socks5
    }

    /// Why a proxy URL was refused, in words.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        public var message: String
        public var description: String { self.message }
    }

    public var kind: Kind
    public var host: String
    public var port: Int
    /// For `http://user:pass@host:port`: sent as `Proxy-Authorization: Basic`.
    public var credentials: Credentials?

    /// Parses `http://[user:pass@]host[:port]` or `socks5://host[:port]`; the port
    /// defaults to 80 (http) and 1080 (socks5). A value without a scheme (as proxy
    /// environment variables often hold) is taken as `http://`. `https://` proxies and
    /// SOCKS5 authentication are not supported.
    public init(_ string: String) throws(ParseError) {
        func fail(_ why: String) -> ParseError {
            ParseError(message: "'\(Credentials.redacted(string))' is not a proxy URL: \(why); expected http://[user:pass@]host:port or socks5://host:port")
        }
        var rest = Substring(string)
        if let schemeEnd = rest.range(of: "://") {
            switch rest[..<schemeEnd.lowerBound].lowercased() {
            case "http": self.kind = .http
            case "socks5", "socks5h": self.kind = .socks5
            case "https": throw fail("TLS to the proxy (https://) is not supported, use http://")
            case let other: throw fail("unknown scheme '\(other)'")
            }
            rest = rest[schemeEnd.upperBound...]
        } else {
            self.kind = .http
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else { throw fail("a proxy URL has no path") }
        (self.credentials, rest) = try Credentials.split(rest, fail: fail)
        if self.credentials != nil, self.kind != .http { throw fail("SOCKS5 with a user name and password is not supported") }
        let hostPort = try HostPort.parse(rest, portRange: 1...65535, fail: fail)
        self.host = hostPort.host
        self.port = hostPort.port ?? (self.kind == .http ? 80 : 1080)
    }

    /// `host:port` of the proxy, for messages.
    public var hostPort: String { HostPort.format(host: self.host, port: self.port) }

    /// The URL without the password.
    public var description: String {
        let user = self.credentials.map { "\($0.user):***@" } ?? ""
        return "\(self.kind.rawValue)://\(user)\(self.hostPort)"
    }

    /// `http proxy 127.0.0.1:3128` / `socks5 proxy 127.0.0.1:1080`.
    var name: String { "\(self.kind.rawValue) proxy \(self.hostPort)" }
}

/// Which proxy, if any, a client connection uses: the `proxy` option of `mw.connect`.
///
/// ```swift
/// options.proxy = .environment                        // HTTPS_PROXY, ALL_PROXY, NO_PROXY... (the default)
/// options.proxy = .direct                             // never a proxy
/// options.proxy = .through(try ProxySettings("socks5://127.0.0.1:1080"))
/// ```
public enum ProxyChoice: Sendable, Hashable {
    /// The proxy the environment names for the URL (see ``ProxyEnvironment``), at each dial.
    case environment
    /// No proxy, whatever the environment says.
    case direct
    /// This proxy, for every URL (NO_PROXY does not apply).
    case through(ProxySettings)

    /// The proxy for a dial to `url`. A malformed environment variable is a `connect` error,
    /// so that a connection meant to go through a proxy never goes around it.
    func resolve(for url: TransportURL) throws(ConnectionError) -> ProxySettings? {
        switch self {
        case .direct: return nil
        case .through(let proxy): return proxy
        case .environment:
            do {
                return try ProxyEnvironment.current.proxy(for: url)
            } catch {
                throw ConnectionError(step: .connect, message: error.description)
            }
        }
    }
}
