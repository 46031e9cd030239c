import NIOCore

/// Decodes `{ length = B, endian, adjust, max }` framing: a B-byte unsigned header, then
/// header + `adjust` bytes of message.
///
/// The announced length is checked against `max` as soon as the header is complete, before
/// any of the payload is waited for, so a hostile header can neither make the reader
/// allocate nor make it wait for gigabytes that will be refused anyway.
///
/// ```swift
/// var decoder = LengthPrefixDecoder(LengthPrefix(bytes: 2, endian: .little, max: 4096))
/// ```
public struct LengthPrefixDecoder: MessageDecoder {
    private let prefix: LengthPrefix

    /// Creates a decoder; `prefix` must be valid (see ``LengthPrefix/validate()``).
    public init(_ prefix: LengthPrefix) {
        precondition([1, 2, 4, 8].contains(prefix.bytes), "length header must be 1, 2, 4 or 8 bytes")
        self.prefix = prefix
    }

    public mutating func decode(_ buffer: inout ByteBuffer) throws(TCPFramingError) -> ByteBuffer? {
        guard let header = self.peekHeader(buffer) else { return nil }
        let length = try self.payloadLength(header)
        guard buffer.readableBytes - self.prefix.bytes >= length else { return nil }
        buffer.moveReaderIndex(forwardBy: self.prefix.bytes)
        return buffer.readSlice(length: length)
    }

    private func peekHeader(_ buffer: ByteBuffer) -> UInt64? {
        let endianness: Endianness = self.prefix.endian == .big ? .big : .little
        let at = buffer.readerIndex
        switch self.prefix.bytes {
        case 1: return buffer.getInteger(at: at, as: UInt8.self).map(UInt64.init)
        case 2: return buffer.getInteger(at: at, endianness: endianness, as: UInt16.self).map(UInt64.init)
        case 4: return buffer.getInteger(at: at, endianness: endianness, as: UInt32.self).map(UInt64.init)
        default: return buffer.getInteger(at: at, endianness: endianness, as: UInt64.self)
        }
    }

    private func payloadLength(_ header: UInt64) throws(TCPFramingError) -> Int {
        guard header <= UInt64(Int.max) else {
            throw .tooBig("length header announces \(header) bytes", max: self.prefix.max)
        }
        let (length, overflow) = Int(header).addingReportingOverflow(self.prefix.adjust)
        if overflow || length > self.prefix.max {
            throw .tooBig("length header announces \(header) bytes (adjust \(self.prefix.adjust))", max: self.prefix.max)
        }
        guard length >= 0 else {
            throw TCPFramingError("length header \(header) with adjust \(self.prefix.adjust) gives a negative length")
        }
        return length
    }
}
