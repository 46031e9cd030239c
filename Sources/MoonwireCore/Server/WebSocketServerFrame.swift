import NIOCore

/// Encodes server-to-client WebSocket frames (RFC 6455 §5.2): unmasked, header and payload
/// in one buffer, so a broadcast can write the same bytes to every peer.
enum WebSocketServerFrame {
    /// The largest header of an unmasked frame: 2 + 8 (length).
    static let maxHeaderSize = 10

    static func headerSize(payload: Int) -> Int {
        payload < 126 ? 2 : payload <= 0xFFFF ? 4 : 10
    }

    /// A new buffer holding the whole frame.
    static func encode(opcode: UInt8, fin: Bool = true, rsv1: Bool = false, payload: ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer {
        let length = payload.readableBytes
        var out = allocator.buffer(capacity: Self.headerSize(payload: length) + length)
        Self.writeHeader(into: &out, opcode: opcode, fin: fin, rsv1: rsv1, length: length)
        out.writeImmutableBuffer(payload)
        return out
    }

    /// Turns `buffer`'s readable bytes into a frame in place, using the free space in front of
    /// them for the header (a freshly compressed payload leaves room for one).
    static func frameInPlace(opcode: UInt8, fin: Bool, rsv1: Bool, buffer: inout ByteBuffer) {
        let length = buffer.readableBytes
        let start = buffer.readerIndex - Self.headerSize(payload: length)
        precondition(start >= 0, "no room for the frame header")
        var header = ByteBuffer()
        Self.writeHeader(into: &header, opcode: opcode, fin: fin, rsv1: rsv1, length: length)
        buffer.setBuffer(header, at: start)
        buffer.moveReaderIndex(to: start)
    }

    private static func writeHeader(into out: inout ByteBuffer, opcode: UInt8, fin: Bool, rsv1: Bool, length: Int) {
        out.writeInteger((fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | opcode as UInt8)
        if length < 126 {
            out.writeInteger(UInt8(length))
        } else if length <= 0xFFFF {
            out.writeInteger(UInt8(126))
            out.writeInteger(UInt16(length))
        } else {
            out.writeInteger(UInt8(127))
            out.writeInteger(UInt64(length))
        }
    }
}
