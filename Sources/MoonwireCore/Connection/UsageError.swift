/// Misuse of a connection (``ClientConnection``, ``ServerPeer``, a framing) by its caller,
/// as opposed to a network or peer failure: one case per mistake, whose description is the
/// sentence a script's `nil, err` or a log line shows.
///
/// ```swift
/// do {
///     try connection.send(ByteBuffer(string: "a\nb"), kind: .text)   // line framing
/// } catch .containsDelimiter {
///     // the message would arrive as two
/// } catch {
///     print(error)   // "connection is not open", ...
/// }
/// ```
public enum UsageError: Error, Sendable, Hashable, CustomStringConvertible {
    // MARK: The connection's state

    /// A message, fragment or ping on a connection that is not open.
    case notOpen
    /// A message for a server's peer that is not connected, or no longer.
    case peerNotConnected
    /// ``ClientConnection/connect(to:)`` while a dial is under way or the connection is open.
    case cannotConnect(ClientConnection.State)
    /// ``ClientConnection/connect(to:)`` to a URL of the other transport.
    case otherTransport(TransportURL)
    /// A dial's step came after a newer dial began: it stops the old dial's bootstrap and
    /// never reaches a caller.
    case dialSuperseded

    // MARK: What the transport has

    /// A ping on a TCP connection.
    case noPing
    /// A message fragment on a TCP connection.
    case noFragments
    /// A close or ping that a control frame cannot carry.
    case control(WebSocketControlError)
    /// permessage-deflate failed on an outbound message.
    case compressionFailed(String)

    // MARK: Fragmented messages

    /// A whole message while a fragmented one is being sent.
    case fragmentedMessageUnfinished
    /// A fragment of one kind while a message of the other kind is being sent.
    case fragmentKindChanged(MessageKind, sending: MessageKind)

    // MARK: Framing options

    /// A length prefix of other than 1, 2, 4 or 8 bytes.
    case lengthHeaderSize(Int)
    /// A length framing's `max` below 0.
    case negativeLengthMax
    /// A line or delimiter framing's `max` of 0 or less.
    case nonPositiveMax
    /// A delimiter framing with an empty delimiter.
    case emptyDelimiter
    /// A fixed framing's size of 0 or less.
    case nonPositiveFixedSize(Int)

    // MARK: Messages a framing cannot carry

    /// A fixed framing's message of another size.
    case wrongFixedSize(Int, framing: Int)
    /// A line or delimiter framing's message that holds the delimiter: it would arrive as two.
    case containsDelimiter(framing: String, delimiter: [UInt8])
    /// A message whose length the length prefix cannot hold.
    case tooLongForLengthHeader(Int, prefix: LengthPrefix)
    /// The open transport refused the message (a framing's limits; the connection's last
    /// refusal says which).
    case unsendable

    public var description: String {
        switch self {
        case .notOpen: return "connection is not open"
        case .peerNotConnected: return "peer is not connected"
        case .cannotConnect(let state): return "cannot connect: the connection is \(state.rawValue)"
        case .otherTransport(.tcp(let url)): return "a WebSocket connection cannot dial \(url)"
        case .otherTransport(.webSocket(let url)): return "a TCP connection cannot dial \(url)"
        case .dialSuperseded: return "dial superseded"
        case .noPing: return "TCP has no ping; use a heartbeat message"
        case .noFragments: return "TCP has no fragmented messages"
        case .control(let error): return error.description
        case .compressionFailed(let error): return "compression failed: \(error)"
        case .fragmentedMessageUnfinished: return "a fragmented message is being sent; finish it first"
        case .fragmentKindChanged(let kind, let sending):
            return "fragment of a \(kind) message while a \(sending) message is being sent"
        case .lengthHeaderSize(let bytes): return "length framing needs a header of 1, 2, 4 or 8 bytes, got \(bytes)"
        case .negativeLengthMax: return "length framing max must not be negative"
        case .nonPositiveMax: return "framing max must be positive"
        case .emptyDelimiter: return "framing delimiter must not be empty"
        case .nonPositiveFixedSize(let size): return "fixed framing needs a positive size, got \(size)"
        case .wrongFixedSize(let size, let framing): return "fixed framing sends exactly \(framing) bytes, got \(size)"
        case .containsDelimiter(let framing, let delimiter):
            let shown = String(decoding: delimiter, as: UTF8.self).debugDescription
            return "\(framing): the message contains the delimiter \(shown); it would arrive as two messages"
        case .tooLongForLengthHeader(let size, let prefix):
            return "a \(size)-byte message does not fit a \(prefix.bytes)-byte length header (adjust \(prefix.adjust))"
        case .unsendable: return "the message cannot be sent on this connection"
        }
    }
}
