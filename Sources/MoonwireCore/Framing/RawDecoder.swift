import NIOCore

/// Decodes `"raw"` framing: whatever arrived is a message, so message boundaries are the
/// network's, not the sender's.
///
/// ```swift
/// var reader = MessageReader(RawDecoder())
/// ```
public struct RawDecoder: MessageDecoder {
    /// Creates the decoder.
    public init() {}

    public mutating func decode(_ buffer: inout ByteBuffer) throws(TCPFramingError) -> ByteBuffer? {
        buffer.readableBytes > 0 ? buffer.readSlice(length: buffer.readableBytes) : nil
    }
}
