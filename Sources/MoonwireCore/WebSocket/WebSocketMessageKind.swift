/// The type of a WebSocket data message.
public enum WebSocketMessageKind: Sendable, Hashable, CustomStringConvertible {
    /// A UTF-8 text message; the core has validated its encoding.
    case text
    /// An opaque binary message.
    case binary

    /// `"text"` or `"binary"`, the names the Lua API uses.
    public var description: String {
        switch self {
        case .text: return "text"
        case .binary: return "binary"
        }
    }
}
