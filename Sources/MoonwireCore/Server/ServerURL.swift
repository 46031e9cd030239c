/// Where a server listens: `ws://`, `wss://`, `tcp://` or `tls://`, a host to bind (an IP
/// literal or a name that resolves to one) and a port, 0 for any free port.
///
/// A WebSocket URL may carry a path: only requests for that path (the query aside) are
/// upgraded, others get 404. Without a path, or with `/`, any path is accepted.
///
/// ```swift
/// let url = try ServerURL("ws://127.0.0.1:0/chat")
/// url.kind   // .webSocket
/// url.path   // "/chat"
/// ```
public struct ServerURL: Sendable, Hashable, CustomStringConvertible {
    /// The protocol a server speaks.
    public enum Kind: Sendable, Hashable {
        case webSocket, tcp
    }

    /// WebSocket or raw TCP.
    public var kind: Kind
    /// True for `wss://` and `tls://`.
    public var secure: Bool
    /// The address to bind, without IPv6 brackets.
    public var host: String
    /// The port; 0 asks for any free port (the bound server reports the real one).
    public var port: Int
    /// The WebSocket path to serve; nil serves every path.
    public var path: String?

    /// Parses `string`.
    public init(_ string: String) throws(WebSocketURL.ParseError) {
        func fail(_ why: String) -> WebSocketURL.ParseError {
            WebSocketURL.ParseError(message: "invalid listen URL '\(string)': \(why)")
        }
        guard let schemeEnd = string.range(of: "://") else { throw fail("expected ws://, wss://, tcp:// or tls://") }
        switch string[..<schemeEnd.lowerBound].lowercased() {
        case "ws": (self.kind, self.secure) = (.webSocket, false)
        case "wss": (self.kind, self.secure) = (.webSocket, true)
        case "tcp": (self.kind, self.secure) = (.tcp, false)
        case "tls": (self.kind, self.secure) = (.tcp, true)
        default: throw fail("the scheme must be ws, wss, tcp or tls")
        }
        let rest = string[schemeEnd.upperBound...]
        if rest.contains("#") { throw fail("fragments are not allowed") }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let parsed = try HostPort.parse(rest[..<authorityEnd], portRange: 0...65535, fail: fail)
        guard let port = parsed.port else { throw fail("a port is required (0 picks a free one)") }
        self.host = parsed.host
        self.port = port
        var path = rest[authorityEnd...]
        if let query = path.firstIndex(of: "?") { path = path[..<query] }
        switch self.kind {
        case .webSocket:
            self.path = path.isEmpty || path == "/" ? nil : String(path)
        case .tcp:
            guard path.isEmpty || path == "/" else { throw fail("a TCP URL has no path") }
            self.path = nil
        }
    }

    /// The scheme: `ws`, `wss`, `tcp` or `tls`.
    public var scheme: String {
        switch (self.kind, self.secure) {
        case (.webSocket, false): return "ws"
        case (.webSocket, true): return "wss"
        case (.tcp, false): return "tcp"
        case (.tcp, true): return "tls"
        }
    }

    /// The URL in canonical form, `ws://127.0.0.1:9000/chat`.
    public var description: String {
        let base = "\(self.scheme)://\(HostPort.format(host: self.host, port: self.port))"
        switch self.kind {
        case .webSocket: return base + (self.path ?? "/")
        case .tcp: return base
        }
    }
}
