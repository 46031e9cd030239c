import NIOCore

/// Decodes `{ fixed = N }` framing: every message is exactly `size` bytes.
///
/// ```swift
/// var decoder = FixedLengthDecoder(size: 16)
/// ```
public struct FixedLengthDecoder: MessageDecoder {
    private let size: Int

    /// Creates a decoder for messages of `size` (> 0) bytes.
    public init(size: Int) {
        precondition(size > 0, "fixed framing needs a positive size")
        self.size = size
    }

    public mutating func decode(_ buffer: inout ByteBuffer) throws(TCPFramingError) -> ByteBuffer? {
        buffer.readSlice(length: self.size)
    }
}
