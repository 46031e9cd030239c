/// The type of a WebSocket data message.
public enum MessageKind: Sendable, Hashable, CustomStringConvertible {
    /// A UTF-8 text message; the core has validated its encoding.
    case text
    /// An opaque binary message.
    case binary

    /// The opcode of the frame that starts a message of this kind (RFC 6455: 0x1 text, 0x2 binary).
    var opcode: WebSocketFrameOpcode { self == .text ? .text : .binary }

    /// `"text"` or `"binary"`, the names the Lua API uses.
    public var name: StaticString {
        switch self {
        case .text: return "text"
        case .binary: return "binary"
        }
    }

    public var description: String { name.description }
}
