/// Rules for WebSocket close status codes (RFC 6455 §7.4).
///
/// ```swift
/// CloseCode.isValidOnWire(1000)  // true
/// CloseCode.isValidOnWire(1005)  // false: reserved for "no code was given"
/// ```
public enum CloseCode {
    /// Normal closure.
    public static let normal: UInt16 = 1000
    /// The endpoint is going away (shutdown, page navigation).
    public static let goingAway: UInt16 = 1001
    /// The peer broke the protocol.
    public static let protocolError: UInt16 = 1002
    /// A data type the endpoint cannot accept.
    public static let unsupportedData: UInt16 = 1003
    /// Reported, never sent: the close frame carried no code.
    public static let noStatus: UInt16 = 1005
    /// Reported, never sent: the connection ended without a close frame.
    public static let abnormal: UInt16 = 1006
    /// Message data inconsistent with its type, such as invalid UTF-8 in a text message.
    public static let invalidPayload: UInt16 = 1007
    /// A generic policy violation.
    public static let policyViolation: UInt16 = 1008
    /// A message was larger than the endpoint accepts.
    public static let messageTooBig: UInt16 = 1009
    /// The server did not negotiate an extension the client needs.
    public static let mandatoryExtension: UInt16 = 1010
    /// The server hit an unexpected condition.
    public static let internalError: UInt16 = 1011

    /// The codes a close frame may carry, declared once: ``isValidOnWire(_:)`` and the
    /// words of errors (``sendableRangesText``) come from here. 1012–1014 are registered
    /// with IANA (service restart, try again later, bad gateway) and servers do send them;
    /// 1004–1006 and 1015 are reserved for reporting and must never be on the wire.
    public static let sendableRanges: [ClosedRange<UInt16>] = [1000...1003, 1007...1014, 3000...4999]

    /// Every code a peer may report, from the lowest defined to the highest
    /// application code (`reconnect.stop_codes` takes these).
    public static let reportableRange: ClosedRange<UInt16> = 1000...4999

    /// The codes applications define (3000–3999 registered, 4000–4999 private use).
    public static let applicationRange: ClosedRange<UInt16> = 3000...4999

    /// `1000 to 1003, 1007 to 1014, or 3000 to 4999`, for errors.
    public static var sendableRangesText: String {
        let parts = sendableRanges.map { "\($0.lowerBound) to \($0.upperBound)" }
        return parts.dropLast().joined(separator: ", ") + ", or " + parts[parts.count - 1]
    }

    /// `1000 to 4999`, for errors.
    public static var reportableRangeText: String { "\(reportableRange.lowerBound) to \(reportableRange.upperBound)" }

    /// True if `code` may appear in a close frame (``sendableRanges``).
    public static func isValidOnWire(_ code: UInt16) -> Bool {
        for range in sendableRanges where range.contains(code) { return true }
        return false
    }
}
