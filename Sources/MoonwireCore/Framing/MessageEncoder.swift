import NIOCore

/// What `send` writes for a message under a ``TCPFraming``: the message plus `\n` (line),
/// plus the delimiter, exactly as is (fixed, raw, custom), or after its length header.
///
/// Messages that the peer's decoder would cut differently are refused as usage errors
/// rather than silently split: a line or delimited message containing its terminator, a
/// fixed message of the wrong size, a length the header cannot hold.
///
/// ```swift
/// let encoder = MessageEncoder(.line())
/// let wire = try encoder.encode(ByteBuffer(string: "hello"))   // "hello\n"
/// ```
public struct MessageEncoder: Sendable {
    /// The framing messages are encoded for.
    public let framing: TCPFraming

    /// Creates an encoder for `framing`.
    public init(_ framing: TCPFraming) {
        self.framing = framing
    }

    /// The bytes to write for `message`: one buffer, so a broadcast can write the same one
    /// to every peer.
    public func encode(_ message: ByteBuffer, allocator: ByteBufferAllocator = ByteBufferAllocator()) throws(UsageError) -> ByteBuffer {
        try framing.mode.encode(message, allocator: allocator)
    }
}
