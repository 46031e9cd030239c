/// Which end of a WebSocket connection we are. The role decides only masking (a client
/// masks what it sends, a server must receive masked frames and send unmasked ones) and the
/// handshake; parsing, message assembly and the close handshake are shared.
public enum WebSocketRole: Sendable, Hashable {
    case client
    case server
}
