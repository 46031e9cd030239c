import NIOCore

/// One framing mode's decoding step, as a pure function of the bytes received so far.
///
/// ``MessageReader`` owns those bytes and calls ``decode(_:)`` until it returns nil. A
/// decoder takes the next message off the front of `buffer` (moving its reader index past
/// the message and its framing) or returns nil, consuming nothing, when `buffer` does not
/// yet hold a complete message. It may keep state between calls (how far it already
/// searched), but must not keep bytes: they stay in the buffer, so any split or glue of
/// the input decodes the same. Limits are checked as early as the bytes allow, never by
/// allocating what a header claims.
///
/// ```swift
/// struct NULTerminated: MessageDecoder {
///     mutating func decode(_ buffer: inout ByteBuffer) throws(TCPFramingError) -> ByteBuffer? {
///         guard let end = buffer.readableBytesView.firstIndex(of: 0) else { return nil }
///         defer { buffer.moveReaderIndex(forwardBy: 1) }
///         return buffer.readSlice(length: end - buffer.readerIndex)
///     }
/// }
/// ```
public protocol MessageDecoder {
    /// Removes and returns the next complete message, or returns nil to wait for more.
    mutating func decode(_ buffer: inout ByteBuffer) throws(TCPFramingError) -> ByteBuffer?
}
