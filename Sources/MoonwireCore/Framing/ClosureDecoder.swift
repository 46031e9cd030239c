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
