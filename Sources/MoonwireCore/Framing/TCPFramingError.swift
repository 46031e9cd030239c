/// The peer sent bytes the connection's framing cannot accept: a length header above
/// `max`, a line longer than `max`, or a custom framing function that failed.
///
/// The connection is closed. It is reported like a WebSocket protocol violation, with the
/// close code the WebSocket equivalent would earn: 1009 for a message over a limit, 1002
/// for anything else (docs/scripting.md, "TCP close codes").
///
/// ```swift
/// do { while let m = try reader.next() { deliver(m) } }
/// catch { print(error) }   // "length header announces 5000000 bytes, above max 65536"
/// ```
public struct TCPFramingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What the peer did wrong.
    public var message: String
    /// 1009 for a size limit, 1002 otherwise.
    public var closeCode: UInt16

    /// Creates an error; 1002 unless told otherwise.
    public init(_ message: String, closeCode: UInt16 = CloseCode.protocolError) {
        self.message = message
        self.closeCode = closeCode
    }

    /// The message.
    public var description: String { self.message }

    /// How the connection reports it: a `protocol` failure naming the close code.
    var connectionError: ConnectionError {
        ConnectionError(step: .protocol, message: "\(self.message) (closed with \(self.closeCode))", closeCode: self.closeCode)
    }

    static func tooBig(_ what: String, max: Int) -> TCPFramingError {
        TCPFramingError("\(what), above max \(max)", closeCode: CloseCode.messageTooBig)
    }
}
