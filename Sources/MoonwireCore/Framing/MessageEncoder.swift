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
        switch self.framing {
        case .line:
            return try Self.terminate(message, with: [UInt8(ascii: "\n")], name: "line framing", allocator: allocator)
        case .delimiter(let delimiter, _):
            return try Self.terminate(message, with: delimiter, name: "delimiter framing", allocator: allocator)
        case .fixed(let size):
            guard message.readableBytes == size else {
                throw .wrongFixedSize(message.readableBytes, framing: size)
            }
            return message
        case .length(let prefix):
            return try Self.prefixed(message, prefix: prefix, allocator: allocator)
        case .raw, .custom:
            return message
        }
    }

    private static func terminate(_ message: ByteBuffer, with terminator: [UInt8], name: String, allocator: ByteBufferAllocator) throws(UsageError) -> ByteBuffer {
        if message.readableBytesView.firstRange(of: terminator) != nil {
            throw .containsDelimiter(framing: name, delimiter: terminator)
        }
        var out = allocator.buffer(capacity: message.readableBytes + terminator.count)
        out.writeImmutableBuffer(message)
        out.writeBytes(terminator)
        return out
    }

    private static func prefixed(_ message: ByteBuffer, prefix: LengthPrefix, allocator: ByteBufferAllocator) throws(UsageError) -> ByteBuffer {
        let value = message.readableBytes - prefix.adjust
        guard value >= 0, UInt64(value) <= prefix.headerLimit else {
            throw .tooLongForLengthHeader(message.readableBytes, prefix: prefix)
        }
        let endianness: Endianness = prefix.endian == .big ? .big : .little
        var out = allocator.buffer(capacity: prefix.bytes + message.readableBytes)
        switch prefix.bytes {
        case 1: out.writeInteger(UInt8(value))
        case 2: out.writeInteger(UInt16(value), endianness: endianness)
        case 4: out.writeInteger(UInt32(value), endianness: endianness)
        default: out.writeInteger(UInt64(value), endianness: endianness)
        }
        out.writeImmutableBuffer(message)
        return out
    }
}
