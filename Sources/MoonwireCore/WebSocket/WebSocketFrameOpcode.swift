/// The frame opcodes of RFC 6455 §5.2 that moonwire sends and understands; a frame with
/// any other opcode is a protocol error, refused by ``WebSocketFrameParser`` from its header.
///
/// ```swift
/// let opcode = WebSocketFrameOpcode(rawValue: byte & 0x0F)   // nil: unknown, fail with 1002
/// opcode?.isControl                                         // close, ping, pong
/// ```
public enum WebSocketFrameOpcode: UInt8, Sendable, Hashable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    /// The most payload a control frame (close, ping, pong) carries (RFC 6455 §5.5).
    public static let maxControlPayload = 125

    /// True for close, ping and pong: at most ``maxControlPayload`` bytes, never fragmented.
    public var isControl: Bool { self.rawValue & 0x8 != 0 }
}
