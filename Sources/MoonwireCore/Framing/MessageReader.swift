import NIOCore

/// Collects the bytes of a stream as they arrive and cuts them into messages with a
/// ``MessageDecoder``: the whole answer to the "sticky packet" problem, without I/O.
///
/// Messages are slices of the collected bytes, not copies. When everything collected has
/// been consumed, the next read's buffer is adopted as is, so a stream whose reads each
/// carry whole messages is never copied at all.
///
/// ```swift
/// var reader = MessageReader(TCPFraming.line().makeDecoder())
/// reader.append(ByteBuffer(string: "abc\nda"))
/// try reader.next()   // "abc"
/// try reader.next()   // nil: "da" waits for the rest of its line
/// ```
public struct MessageReader {
    private var decoder: any MessageDecoder
    private var buffer: ByteBuffer?

    /// Creates a reader with nothing collected.
    public init(_ decoder: any MessageDecoder) {
        self.decoder = decoder
    }

    /// Bytes received but not yet part of a message.
    public var bufferedBytes: Int { self.buffer?.readableBytes ?? 0 }

    /// Adds bytes read from the network.
    public mutating func append(_ bytes: ByteBuffer) {
        guard bytes.readableBytes > 0 else { return }
        guard var buffer = self.buffer, buffer.readableBytes > 0 else {
            self.buffer = bytes
            return
        }
        self.buffer = nil  // keep the storage uniquely referenced while writing
        // Reclaim the space of consumed messages before growing, as long as it is worth a move.
        if buffer.readerIndex >= 4096 && buffer.readerIndex >= buffer.capacity / 2 {
            buffer.discardReadBytes()
        }
        buffer.writeImmutableBuffer(bytes)
        self.buffer = buffer
    }

    /// The next complete message, or nil until more bytes arrive. After a thrown error
    /// the stream is unusable: the connection must be closed.
    public mutating func next() throws(TCPFramingError) -> ByteBuffer? {
        guard var buffer = self.buffer else { return nil }
        self.buffer = nil
        defer { self.buffer = buffer.readableBytes > 0 ? buffer : nil }
        return try self.decoder.decode(&buffer)
    }
}
