/// What a client offers for permessage-deflate (RFC 7692 §7.1).
///
/// ```swift
/// let offer = PerMessageDeflateOffer()            // "permessage-deflate; client_max_window_bits"
/// let agreed = try offer.accept(responseHeaderValue)
/// ```
public struct PerMessageDeflateOffer: Sendable, Hashable {
    /// Ask the server to reset its compressor after every message.
    public var serverNoContextTakeover: Bool
    /// Announce that we reset our compressor after every message.
    public var clientNoContextTakeover: Bool
    /// Ask the server to use at most this LZ77 window (8...15).
    public var serverMaxWindowBits: Int?
    /// Let the server limit our window; a value also tells it our own upper bound. With
    /// `.some(nil)` the parameter is sent without a value.
    public var clientMaxWindowBits: Int??

    /// Creates an offer. The default offer lets the server pick every parameter.
    public init(
        serverNoContextTakeover: Bool = false,
        clientNoContextTakeover: Bool = false,
        serverMaxWindowBits: Int? = nil,
        clientMaxWindowBits: Int?? = .some(nil)
    ) {
        self.serverNoContextTakeover = serverNoContextTakeover
        self.clientNoContextTakeover = clientNoContextTakeover
        self.serverMaxWindowBits = serverMaxWindowBits
        self.clientMaxWindowBits = clientMaxWindowBits
    }

    /// The `Sec-WebSocket-Extensions` request header value.
    public var headerValue: String {
        var parts = ["permessage-deflate"]
        if self.serverNoContextTakeover { parts.append("server_no_context_takeover") }
        if self.clientNoContextTakeover { parts.append("client_no_context_takeover") }
        if let bits = self.serverMaxWindowBits { parts.append("server_max_window_bits=\(bits)") }
        switch self.clientMaxWindowBits {
        case .none: break
        case .some(.none): parts.append("client_max_window_bits")
        case .some(.some(let bits)): parts.append("client_max_window_bits=\(bits)")
        }
        return parts.joined(separator: "; ")
    }

    /// Checks the server's `Sec-WebSocket-Extensions` response values against this offer.
    ///
    /// Returns nil when the server declined compression (no extension in the response), the
    /// agreed parameters when it accepted, and throws a readable reason when the response
    /// is not one a server could legally send for this offer; the handshake must then fail.
    public func accept(_ responseValues: [String]) throws(ConnectionError) -> PerMessageDeflateParameters? {
        let extensions = try Self.parseExtensions(responseValues)
        guard let first = extensions.first else { return nil }
        guard extensions.count == 1, first.name == "permessage-deflate" else {
            throw ConnectionError.handshake("server accepted extensions we did not offer: \(responseValues.joined(separator: ", "))")
        }
        var agreed = PerMessageDeflateParameters()
        var seen = Set<String>()
        for (name, value) in first.parameters {
            guard seen.insert(name).inserted else {
                throw ConnectionError.handshake("permessage-deflate parameter \(name) given twice")
            }
            switch name {
            case "server_no_context_takeover", "client_no_context_takeover":
                guard value == nil else {
                    throw ConnectionError.handshake("permessage-deflate parameter \(name) takes no value")
                }
                if name == "server_no_context_takeover" {
                    agreed.serverNoContextTakeover = true
                } else {
                    agreed.clientNoContextTakeover = true
                }
            case "server_max_window_bits":
                let bits = try Self.windowBits(name, value)
                if let limit = self.serverMaxWindowBits, bits > limit {
                    throw ConnectionError.handshake("server_max_window_bits=\(bits) exceeds the offered \(limit)")
                }
                agreed.serverMaxWindowBits = bits
            case "client_max_window_bits":
                guard case .some(let offered) = self.clientMaxWindowBits else {
                    throw ConnectionError.handshake("server sent client_max_window_bits we did not offer")
                }
                let bits = try Self.windowBits(name, value)
                if let limit = offered, bits > limit {
                    throw ConnectionError.handshake("client_max_window_bits=\(bits) exceeds the offered \(limit)")
                }
                agreed.clientMaxWindowBits = bits
            default:
                throw ConnectionError.handshake("unknown permessage-deflate parameter \(name)")
            }
        }
        if self.serverNoContextTakeover && !agreed.serverNoContextTakeover {
            throw ConnectionError.handshake("server ignored server_no_context_takeover")
        }
        if self.clientNoContextTakeover {
            agreed.clientNoContextTakeover = true
        }
        return agreed
    }

    private static func windowBits(_ name: String, _ value: String?) throws(ConnectionError) -> Int {
        // RFC 7692: a decimal integer 8...15 without leading zeroes (quoted form allowed).
        guard var text = value else {
            throw ConnectionError.handshake("permessage-deflate parameter \(name) needs a value")
        }
        if text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") {
            text = String(text.dropFirst().dropLast())
        }
        guard let bits = Int(text), (8...15).contains(bits), !text.hasPrefix("0"), !text.hasPrefix("+") else {
            throw ConnectionError.handshake("invalid \(name) value \(text)")
        }
        return bits
    }

    /// Splits `ext1; a=1; b, ext2` lists, across all header lines.
    static func parseExtensions(_ values: [String]) throws(ConnectionError) -> [(name: String, parameters: [(String, String?)])] {
        var result: [(name: String, parameters: [(String, String?)])] = []
        for value in values {
            for element in value.split(separator: ",") {
                let pieces = element.split(separator: ";").map { $0.trimmingSpaces }
                guard let name = pieces.first, !name.isEmpty else {
                    throw ConnectionError.handshake("malformed Sec-WebSocket-Extensions: \(value)")
                }
                var parameters: [(String, String?)] = []
                for piece in pieces.dropFirst() {
                    if let eq = piece.firstIndex(of: "=") {
                        let key = piece[..<eq].trimmingSpaces
                        let val = piece[piece.index(after: eq)...].trimmingSpaces
                        parameters.append((key.lowercased(), val))
                    } else if !piece.isEmpty {
                        parameters.append((piece.lowercased(), nil))
                    }
                }
                result.append((name.lowercased(), parameters))
            }
        }
        return result
    }
}

/// The permessage-deflate parameters both sides agreed on.
public struct PerMessageDeflateParameters: Sendable, Hashable {
    /// The server resets its compressor per message, so we reset our decompressor too.
    public var serverNoContextTakeover = false
    /// We reset our compressor per message.
    public var clientNoContextTakeover = false
    /// The server's window; our decompressor must accept at least this.
    public var serverMaxWindowBits = 15
    /// Our compressor's window limit.
    public var clientMaxWindowBits = 15

    /// Parameters with every default (context takeover both ways, 15-bit windows).
    public init() {}
}

extension Substring {
    fileprivate var trimmingSpaces: String {
        String(self.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
