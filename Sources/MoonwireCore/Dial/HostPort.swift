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
