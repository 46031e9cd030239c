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

/// `{ fixed = N }`: every message is exactly `size` bytes, both ways.
public struct FixedFraming: FramingMode {
    public let size: Int

    public init(size: Int) {
        self.size = size
    }

    public func makeDecoder() -> any MessageDecoder { FixedLengthDecoder(size: size) }

    public func encode(_ message: ByteBuffer, allocator: ByteBufferAllocator) throws(UsageError) -> ByteBuffer {
        guard message.readableBytes == size else { throw .wrongFixedSize(message.readableBytes, framing: size) }
        return message
    }

    public func validate() throws(UsageError) {
        guard size > 0 else { throw .nonPositiveFixedSize(size) }
    }

    public var description: String { "fixed \(size)" }
}
