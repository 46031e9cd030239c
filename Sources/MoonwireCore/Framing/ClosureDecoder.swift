import NIOCore

/// Adapts a decoding function (a ``CustomFraming``, the Lua `framing` function) to
/// ``MessageDecoder``.
///
/// A function that returns a message must have consumed bytes (else it would return the
/// same message for ever), and one that consumed bytes without returning a message has
/// skipped them, after which it is asked again. Its errors become framing errors.
///
/// ```swift
/// var decoder = ClosureDecoder { buffer in buffer.readSlice(length: min(4, buffer.readableBytes)) }
/// ```
public struct ClosureDecoder: MessageDecoder {
    private let function: (inout ByteBuffer) throws -> ByteBuffer?

    /// Wraps `function`.
    public init(_ function: @escaping (inout ByteBuffer) throws -> ByteBuffer?) {
        self.function = function
    }

    public mutating func decode(_ buffer: inout ByteBuffer) throws(TCPFramingError) -> ByteBuffer? {
        while buffer.readableBytes > 0 {
            let before = buffer.readerIndex
            let message: ByteBuffer?
            do {
                message = try self.function(&buffer)
            } catch let error as TCPFramingError {
                throw error
            } catch {
                throw TCPFramingError("framing function failed: \(error)")
            }
            let consumed = buffer.readerIndex - before
            guard consumed >= 0, buffer.readerIndex <= buffer.writerIndex else {
                throw TCPFramingError("framing function moved the buffer backwards")
            }
            if let message {
                guard consumed > 0 else { throw TCPFramingError("framing function returned a message but consumed no bytes") }
                return message
            }
            if consumed == 0 { return nil }
        }
        return nil
    }
}

/// A user-supplied decoding function, wrapped so ``TCPFraming`` stays a plain value.
///
/// The function is called on the connection's event loop with the bytes received so far
/// (its readable bytes); it returns a message and moves the reader index past what it
/// consumed, or returns nil and leaves the buffer alone to wait for more bytes. A thrown
/// error closes the connection as a framing error.
///
/// ```swift
/// let custom = CustomFraming { buffer in
///     guard let end = buffer.readableBytesView.firstIndex(of: 0) else { return nil }
///     let message = buffer.readSlice(length: end - buffer.readerIndex)
///     buffer.moveReaderIndex(forwardBy: 1)
///     return message
/// }
/// let framing = TCPFraming.custom(custom)
/// ```
public final class CustomFraming: @unchecked Sendable, FramingMode {
    // @unchecked: the closure typically captures a Lua state. It is only ever called on the
    // loop of the connection it decodes for, which the caller guarantees by creating the
    // connection on the loop that owns that state.
    let decode: (inout ByteBuffer) throws -> ByteBuffer?

    /// Wraps `decode`; see the type's documentation for its contract.
    public init(_ decode: @escaping (inout ByteBuffer) throws -> ByteBuffer?) {
        self.decode = decode
    }

    /// Identity: two wrappers are the same framing only if they are the same object.
    public static func == (lhs: CustomFraming, rhs: CustomFraming) -> Bool { lhs === rhs }

    /// Hashes the identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    public func makeDecoder() -> any MessageDecoder { ClosureDecoder(decode) }

    /// Sent as it is: the script frames what it sends itself.
    public func encode(_ message: ByteBuffer, allocator: ByteBufferAllocator) throws(UsageError) -> ByteBuffer { message }

    public var description: String { "custom" }
}
