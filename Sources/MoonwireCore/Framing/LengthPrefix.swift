import NIOCore

/// The binary length header of `{ length = B, endian = ..., adjust = K, max = BYTES }`
/// framing.
///
/// The header is not part of the message. The payload length is the header's unsigned
/// value plus `adjust`, which covers protocols whose header counts itself (adjust = -B) or
/// a trailing checksum (adjust = +2).
///
/// ```swift
/// // A 4-byte big-endian length that includes the header itself, at most 1 MiB.
/// let prefix = LengthPrefix(bytes: 4, endian: .big, adjust: -4, max: 1 << 20)
/// ```
public struct LengthPrefix: FramingMode {
    /// The byte order of the header.
    public enum Endian: String, Sendable, Hashable {
        case big, little
    }

    /// Header size: 1, 2, 4 or 8.
    public var bytes: Int
    /// Byte order of the header.
    public var endian: Endian
    /// Added to the header value to get the payload length.
    public var adjust: Int
    /// The largest payload accepted; a header announcing more is a framing error and
    /// nothing of that size is ever allocated.
    public var max: Int

    /// Creates a header description; the defaults are a 4-byte big-endian length of the
    /// payload alone, at most 16 MiB.
    public init(bytes: Int = 4, endian: Endian = .big, adjust: Int = 0, max: Int = TCPFraming.defaultMax) {
        self.bytes = bytes
        self.endian = endian
        self.adjust = adjust
        self.max = max
    }

    /// Throws when `bytes` is not 1, 2, 4 or 8 or `max` is negative.
    public func validate() throws(UsageError) {
        guard [1, 2, 4, 8].contains(self.bytes) else {
            throw .lengthHeaderSize(self.bytes)
        }
        guard self.max >= 0 else { throw .negativeLengthMax }
    }

    /// The largest value the header can hold.
    var headerLimit: UInt64 {
        self.bytes == 8 ? UInt64.max : (UInt64(1) << UInt64(self.bytes * 8)) - 1
    }

    public func makeDecoder() -> any MessageDecoder { LengthPrefixDecoder(self) }

    /// The header, then the message; a length the header cannot hold is refused.
    public func encode(_ message: ByteBuffer, allocator: ByteBufferAllocator) throws(UsageError) -> ByteBuffer {
        let value = message.readableBytes - adjust
        guard value >= 0, UInt64(value) <= headerLimit else {
            throw .tooLongForLengthHeader(message.readableBytes, prefix: self)
        }
        let endianness: Endianness = endian == .big ? .big : .little
        var out = allocator.buffer(capacity: bytes + message.readableBytes)
        switch bytes {
        case 1: out.writeInteger(UInt8(value))
        case 2: out.writeInteger(UInt16(value), endianness: endianness)
        case 4: out.writeInteger(UInt32(value), endianness: endianness)
        default: out.writeInteger(UInt64(value), endianness: endianness)
        }
        out.writeImmutableBuffer(message)
        return out
    }

    public var description: String { "length \(bytes) \(endian)" }
}
