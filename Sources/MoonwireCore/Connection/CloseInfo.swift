/// How a WebSocket connection that had opened came to an end.
///
/// `code` is the close code the peer sent (1005 if its close frame carried none), the code
/// we sent when we failed the connection, or 1006 when no close handshake took place.
public struct CloseInfo: Sendable, Hashable, CustomStringConvertible {
    /// Who ended the connection.
    public enum Initiator: String, Sendable, Hashable {
        /// We did: `close(code:reason:)`, a protocol violation by the peer, or a close timeout.
        case local
        /// The peer sent a close frame first.
        case peer
        /// The transport went away without a close handshake.
        case network
    }

    /// The close code (see the type's documentation for which side's code this is).
    public var code: UInt16
    /// The close reason, possibly empty.
    public var reason: String
    /// True when close frames went both ways and no protocol error occurred.
    public var clean: Bool
    /// Who ended the connection.
    public var initiator: Initiator

    /// Creates a close description.
    public init(code: UInt16, reason: String, clean: Bool, initiator: Initiator) {
        self.code = code
        self.reason = reason
        self.clean = clean
        self.initiator = initiator
    }

    /// For logs: `1000 "bye" (clean, by peer)`.
    public var description: String {
        "\(self.code) \"\(self.reason)\" (\(self.clean ? "clean" : "unclean"), by \(self.initiator.rawValue))"
    }
}
