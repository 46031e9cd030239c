/// A client URL of any scheme moonwire dials: `ws://`, `wss://`, `tcp://` or `tls://`.
///
/// ```swift
/// let url = try TransportURL("tls://example.com:7000")
/// if case .tcp(let tcp) = url { tcp.secure }   // true
/// ```
public enum TransportURL: Sendable, Hashable, CustomStringConvertible {
    /// `ws://` or `wss://`.
    case webSocket(WebSocketURL)
    /// `tcp://` or `tls://`.
    case tcp(TCPURL)

    /// Parses `string`, dispatching on its scheme.
    public init(_ string: String) throws(WebSocketURL.ParseError) {
        let scheme = string.range(of: "://").map { string[..<$0.lowerBound].lowercased() }
        switch scheme {
        case "tcp"?, "tls"?:
            self = .tcp(try TCPURL(string))
        case "ws"?, "wss"?:
            self = .webSocket(try WebSocketURL(string))
        default:
            throw WebSocketURL.ParseError(message: "invalid URL '\(string)': expected ws://, wss://, tcp:// or tls://")
        }
    }

    /// True for `wss://` and `tls://`.
    public var secure: Bool {
        switch self {
        case .webSocket(let url): return url.secure
        case .tcp(let url): return url.secure
        }
    }

    /// The URL in canonical form.
    public var description: String {
        switch self {
        case .webSocket(let url): return url.description
        case .tcp(let url): return url.description
        }
    }
}
