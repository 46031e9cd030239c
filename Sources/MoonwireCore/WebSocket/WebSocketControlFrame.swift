import NIOCore

/// A close frame's code and reason, checked: the one place that knows what a close frame
/// may carry (RFC 6455 §5.5, §7.4). Every caller (``ClientConnection``, ``ServerPeer``,
/// the Lua bindings, the interactive client) builds one and words the error its own way.
///
/// ```swift
/// let close = try WebSocketClose(code: 4000, reason: "done")
/// _ = try WebSocketClose(code: 1005, reason: "")  // throws .invalidCloseCode(1005)
/// ```
public struct WebSocketClose: Sendable, Hashable {
    /// The most bytes of reason a close frame carries: 125 less the 2 of the code.
    public static let maxReason = WebSocketFrameOpcode.maxControlPayload - 2

    /// A code a close frame may carry (``CloseCode/isValidOnWire(_:)``).
    public let code: UInt16
    /// At most ``maxReason`` bytes of UTF-8.
    public let reason: String

    /// Checks `code` (any integer, as a script or a command line gives it) and `reason`.
    public init(code: Int, reason: String) throws(WebSocketControlError) {
        guard let wire = UInt16(exactly: code), CloseCode.isValidOnWire(wire) else {
            throw .invalidCloseCode(code)
        }
        guard reason.utf8.count <= Self.maxReason else { throw .closeReasonTooLong }
        self.code = wire
        self.reason = reason
    }

    /// A close the wire already checked (the echo of the peer's).
    init(checked code: UInt16, reason: String) {
        self.code = code
        self.reason = reason
    }
}

/// A ping's payload, checked: at most 125 bytes (RFC 6455 §5.5), the one place that says so.
///
/// ```swift
/// let ping = try WebSocketPing(ByteBuffer(string: "probe"))
/// ```
public struct WebSocketPing {
    /// The most bytes a control frame carries.
    public static let maxPayload = WebSocketFrameOpcode.maxControlPayload

    /// The payload, which the pong carries back.
    public let payload: ByteBuffer

    /// Checks the payload's size.
    public init(_ payload: ByteBuffer) throws(WebSocketControlError) {
        guard payload.readableBytes <= Self.maxPayload else { throw .pingTooLong }
        self.payload = payload
    }
}

/// What ``WebSocketClose`` or ``WebSocketPing`` refused. The description is the core's
/// wording; callers with their own wording (an argument error in Lua) switch on the case.
public enum WebSocketControlError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The code may not be sent in a close frame.
    case invalidCloseCode(Int)
    /// The reason is longer than ``WebSocketClose/maxReason`` bytes.
    case closeReasonTooLong
    /// The payload is longer than ``WebSocketPing/maxPayload`` bytes.
    case pingTooLong

    public var description: String {
        switch self {
        case .invalidCloseCode(let code): return "invalid close code \(code): use 1000 or 3000-4999"
        case .closeReasonTooLong: return "close reason longer than \(WebSocketClose.maxReason) bytes"
        case .pingTooLong: return "ping payload longer than \(WebSocketPing.maxPayload) bytes"
        }
    }
}
