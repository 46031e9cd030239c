import NIOCore

/// Answers to the peer's application-level pings (`auto_reply`): a message that is
/// exactly a rule's `match` bytes is consumed and answered with its `reply`, without
/// reaching the script. Socket.IO's `2` → `3`, graphql-transport-ws's
/// `{"type":"ping"}` → `{"type":"pong"}`. The same rules serve a client connection
/// (``ManagedConnection``) and every peer of a server (``ServerPeer``).
///
/// Matching is a length check and a byte compare per rule: a message longer than
/// every `match` costs one comparison.
///
/// ```swift
/// let rules = AutoReply([.init(match: Array("2".utf8), reply: Array("3".utf8))])
/// rules.answer(to: ByteBuffer(string: "2"), kind: .text)   // ("3", .text)
/// ```
public struct AutoReply: Sendable {
    public struct Rule: Sendable {
        public var match: [UInt8]
        public var reply: ByteBuffer
        /// The reply is valid UTF-8: it may go out as text.
        let replyIsText: Bool

        public init(match: [UInt8], reply: [UInt8]) {
            self.match = match
            self.reply = ByteBuffer(bytes: reply)
            var validator = UTF8Validator()
            self.replyIsText = reply.withUnsafeBytes { validator.feed($0) } && validator.isComplete
        }
    }

    public var rules: [Rule]
    private let longest: Int

    public init(_ rules: [Rule]) {
        self.rules = rules
        self.longest = rules.map(\.match.count).max() ?? 0
    }

    /// The answer to `message` when a rule matches it, with its kind: the probe's kind,
    /// binary when the reply is not valid UTF-8.
    public func answer(to message: ByteBuffer, kind: MessageKind) -> (ByteBuffer, MessageKind)? {
        let count = message.readableBytes
        guard count <= longest else { return nil }
        return message.withUnsafeReadableBytes { bytes in
            for rule in rules where rule.match.count == count && rule.match.elementsEqual(bytes) {
                return (rule.reply, kind == .text && !rule.replyIsText ? .binary : kind)
            }
            return nil
        }
    }
}
