/// The `host[:port]` part of a URL, shared by the TCP and server URL parsers.
struct HostPort {
    var host: String
    var port: Int?

    /// Parses an authority (no user info); IPv6 literals need brackets. `fail` makes the
    /// error naming the whole URL.
    /// Splits `scheme://rest` for a pair of schemes, `plain` and its TLS twin `secure`:
    /// whether it is the secure one, and what follows `://`.
    static func scheme<E: Error>(
        of string: String, plain: String, secure: String, fail: (String) -> E
    ) throws(E) -> (secure: Bool, rest: Substring) {
        guard let end = string.range(of: "://") else { throw fail("expected \(plain):// or \(secure)://") }
        switch string[..<end.lowerBound].lowercased() {
        case plain: return (false, string[end.upperBound...])
        case secure: return (true, string[end.upperBound...])
        default: throw fail("the scheme must be \(plain) or \(secure)")
        }
    }

    static func parse<E: Error>(_ authority: Substring, portRange: ClosedRange<Int>, fail: (String) -> E) throws(E) -> HostPort {
        if authority.contains("@") { throw fail("user info is not supported") }
        var hostPart: Substring
        var portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw fail("unterminated IPv6 literal") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("junk after IPv6 literal") }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
            if hostPart.contains(":") { throw fail("IPv6 literals need brackets") }
        } else {
            hostPart = authority
        }
        guard !hostPart.isEmpty else { throw fail("missing host") }
        var port: Int?
        if let portPart {
            guard let value = Int(portPart), portRange.contains(value) else { throw fail("bad port '\(portPart)'") }
            port = value
        }
        return HostPort(host: String(hostPart), port: port)
    }

    /// `host:port`, with brackets around an IPv6 literal.
    static func format(host: String, port: Int) -> String {
        // On the bytes: Foundation's String.contains(String) cost a server a few µs per peer.
        host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// The `user:password@` of a URL, percent-decoded, one parser for every URL that may carry
/// it: sent as HTTP Basic authentication (RFC 7617), `Authorization` to a WebSocket
/// server, `Proxy-Authorization` to an HTTP proxy.
///
/// ```swift
/// let (credentials, rest) = try Credentials.split("ann:s%40cret@example.com:80", fail: fail)
/// credentials?.password   // "s@cret"
/// rest                    // "example.com:80"
/// ```
public struct Credentials: Sendable, Hashable {
    public var user: String
    public var password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// The header value: `Basic ` and the base64 of `user:password`.
    public var basic: String { "Basic " + BinaryText.base64(Array("\(self.user):\(self.password)".utf8)) }

    /// Takes the user info off an authority (`user[:password]@host:port`): nil when there
    /// is none. The user name may not be empty; a missing password is an empty one.
    static func split<E: Error>(_ authority: Substring, fail: (String) -> E) throws(E) -> (Credentials?, Substring) {
        guard let at = authority.lastIndex(of: "@") else { return (nil, authority) }
        let parts = authority[..<at].split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard let user = Self.percentDecoded(parts[0]), !user.isEmpty else { throw fail("bad user name") }
        guard let password = Self.percentDecoded(parts.count > 1 ? parts[1] : "") else { throw fail("bad password") }
        return (Credentials(user: user, password: password), authority[authority.index(after: at)...])
    }

    /// The URL with the password of its user info, if any, replaced by `***`, for messages.
    static func redacted(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@") else { return url }
        let start = url.range(of: "://")?.upperBound ?? url.startIndex
        guard start < at, let colon = url[start..<at].firstIndex(of: ":") else { return url }
        return String(url[...colon]) + "***" + String(url[at...])
    }

    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var utf8 = text.utf8[...]
        while let byte = utf8.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard utf8.count >= 2, let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16) else { return nil }
            bytes.append(value)
            utf8 = utf8.dropFirst(2)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
