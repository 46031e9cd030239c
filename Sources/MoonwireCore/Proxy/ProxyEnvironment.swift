#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The proxy environment variables, read the way curl reads them.
///
/// - `ws://` uses `http_proxy`, `wss://` uses `https_proxy`; both fall back to
///   `all_proxy`. `tcp://` and `tls://` are not HTTP: only `all_proxy` applies to them.
///   Each name is looked up in lower case first, then in upper case; an empty value is unset.
/// - `no_proxy` (`NO_PROXY`) lists hosts reached directly, separated by commas or spaces:
///   `*` (every host), a domain (`example.org` or `.example.org`: the name and every name
///   under it), an IP address, an IPv4 range (`10.0.0.0/8`), each optionally with
///   `:port`. Names are compared as written in the URL (no DNS lookup), ignoring case.
///   Loopback is not exempt by itself: list `localhost,127.0.0.1` to reach it directly.
///
/// ```swift
/// let env = ProxyEnvironment(["https_proxy": "http://proxy:3128", "no_proxy": ".internal"])
/// try env.proxy(for: TransportURL("wss://example.org/"))     // http proxy proxy:3128
/// try env.proxy(for: TransportURL("wss://api.internal/"))    // nil
/// ```
public struct ProxyEnvironment: Sendable {
    private let lookup: @Sendable (String) -> String?

    /// Reads from `variables` instead of the process environment (tests).
    public init(_ variables: [String: String]) {
        self.lookup = { variables[$0] }
    }

    private init(lookup: @escaping @Sendable (String) -> String?) {
        self.lookup = lookup
    }

    /// The process environment, read at each call.
    public static let current = ProxyEnvironment { name in getenv(name).map { String(cString: $0) } }

    /// The proxy for a dial to `url`, or nil to go direct. Throws when the variable that
    /// applies does not hold a proxy URL.
    public func proxy(for url: TransportURL) throws(ProxySettings.ParseError) -> ProxySettings? {
        let names: [String]
        switch url {
        case .webSocket(let ws): names = [ws.secure ? "https_proxy" : "http_proxy", "all_proxy"]
        case .tcp: names = ["all_proxy"]
        }
        for name in names {
            guard let value = self.variable(name) else { continue }
            let host: String
            let port: Int
            switch url {
            case .webSocket(let ws): (host, port) = (ws.host, ws.port)
            case .tcp(let tcp): (host, port) = (tcp.host, tcp.port)
            }
            if self.bypasses(host: host, port: port) { return nil }
            do {
                return try ProxySettings(value)
            } catch {
                throw ProxySettings.ParseError(message: "\(name.uppercased()): \(error.message)")
            }
        }
        return nil
    }

    /// True when `no_proxy` lists `host` (and `port`).
    public func bypasses(host: String, port: Int) -> Bool {
        guard let list = self.variable("no_proxy") else { return false }
        let host = Self.trimmed(host.lowercased())
        for raw in list.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }) {
            var entry = Substring(raw.lowercased())
            if entry == "*" { return true }
            // An entry's port: after the last colon, unless that colon is inside an IPv6 literal.
            if let colon = entry.lastIndex(of: ":"), !entry.hasSuffix("]"),
               entry.hasPrefix("[") || entry.firstIndex(of: ":") == colon {
                guard Int(entry[entry.index(after: colon)...]) == port else { continue }
                entry = entry[..<colon]
            }
            if entry.hasPrefix("*.") { entry = entry.dropFirst() }
            let name = Self.trimmed(String(entry))
            guard !name.isEmpty else { continue }
            if let range = IPv4Range(name) {
                if let address = IPv4Range(host), range.contains(address.base) { return true }
                continue
            }
            if name.hasPrefix(".") {
                if host.hasSuffix(name) || host == name.dropFirst() { return true }
            } else if host == name || host.hasSuffix("." + name) {
                return true
            }
        }
        return false
    }

    private func variable(_ name: String) -> String? {
        for candidate in [name, name.uppercased()] {
            if let value = self.lookup(candidate), !value.isEmpty { return value }
        }
        return nil
    }

    /// Without IPv6 brackets and a trailing dot.
    private static func trimmed(_ host: String) -> String {
        var host = Substring(host)
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        if host.hasSuffix("."), host.count > 1 { host = host.dropLast() }
        return String(host)
    }
}

/// An IPv4 address with an optional prefix length (`10.0.0.0/8`, `127.0.0.1`).
private struct IPv4Range {
    var base: UInt32
    var prefix: Int

    init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let octets = parts[0].split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return nil }
        var value: UInt32 = 0
        for octet in octets {
            guard let byte = UInt8(octet) else { return nil }
            value = value << 8 | UInt32(byte)
        }
        self.base = value
        if parts.count == 2 {
            guard let prefix = Int(parts[1]), (0...32).contains(prefix) else { return nil }
            self.prefix = prefix
        } else {
            self.prefix = 32
        }
    }

    func contains(_ address: UInt32) -> Bool {
        let mask: UInt32 = self.prefix == 0 ? 0 : ~0 << (32 - self.prefix)
        return address & mask == self.base & mask
    }
}
