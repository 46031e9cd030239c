import NIOHTTP1

extension PerMessageDeflate {
    /// A server's answer to a client's permessage-deflate offers (RFC 7692 §7.1): the
    /// response header value and the compression state, or nil to decline. The first offer
    /// we can honour wins; unknown or malformed parameters make an offer unacceptable.
    ///
    /// ``PerMessageDeflate`` is written from the client's side (it inflates what the server
    /// sends and deflates with the client's window), so a server uses it with the agreed
    /// parameters mirrored: our outbound window and context takeover are the server's.
    static func serverAccept(_ requestHeaders: HTTPHeaders) -> (response: String, deflate: PerMessageDeflate)? {
        let values = requestHeaders[canonicalForm: "sec-websocket-extensions"].map(String.init)
        guard let offers = try? PerMessageDeflateOffer.parseExtensions(values) else { return nil }
        offers: for offer in offers where offer.name == "permessage-deflate" {
            var response = ["permessage-deflate"]
            var mirrored = PerMessageDeflateParameters()
            var seen = Set<String>()
            for (name, value) in offer.parameters {
                guard seen.insert(name).inserted else { continue offers }
                switch name {
                case "server_no_context_takeover":
                    guard value == nil else { continue offers }
                    response.append(name)
                    mirrored.clientNoContextTakeover = true
                case "client_no_context_takeover":
                    guard value == nil else { continue offers }
                    response.append(name)
                    mirrored.serverNoContextTakeover = true
                case "server_max_window_bits":
                    guard let text = value, let bits = Int(text.trimmingCharacters(in: "\"")), (8...15).contains(bits) else { continue offers }
                    response.append("server_max_window_bits=\(bits)")
                    mirrored.clientMaxWindowBits = bits
                case "client_max_window_bits":
                    // Our inflater always has a 15-bit window, which decodes any smaller one.
                    if let text = value {
                        guard let bits = Int(text.trimmingCharacters(in: "\"")), (8...15).contains(bits) else { continue offers }
                    }
                default:
                    continue offers
                }
            }
            guard let deflate = try? PerMessageDeflate(parameters: mirrored) else { return nil }
            return (response.joined(separator: "; "), deflate)
        }
        return nil
    }
}

extension String {
    fileprivate func trimmingCharacters(in character: Character) -> String {
        String(self.drop(while: { $0 == character }).reversed().drop(while: { $0 == character }).reversed())
    }
}
