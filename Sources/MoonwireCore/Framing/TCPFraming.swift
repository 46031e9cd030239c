import NIOCore

/// How a `tcp://` or `tls://` byte stream is cut into messages: the `framing` option of
/// `mw.connect` and `mw.listen` (docs/scripting.md, Connections).
///
/// Each mode has a decoder (``makeDecoder()``), which turns whatever the network delivers,
/// split or glued in any way, back into exactly the messages that were sent, and an
/// encoder (``MessageEncoder``), which is what `send` writes.
///
/// ```swift
/// let framing = TCPFraming.length(LengthPrefix(bytes: 2, endian: .big, max: 64 * 1024))
/// var reader = MessageReader(framing.makeDecoder())
/// reader.append(bytesFromTheSocket)
/// while let message = try reader.next() { handle(message) }
/// let wire = try MessageEncoder(framing).encode(ByteBuffer(string: "hello"))
/// ```
public enum TCPFraming: Sendable, Hashable, CustomStringConvertible {
    /// The default limit of a line or delimited message, as `max_message`'s default.
    public static let defaultMax = 16 * 1024 * 1024

    /// Messages end with `\n`; a `\r` before it is dropped (`"line"`). A line longer than
    /// `max` bytes without its end is a framing error.
    case line(max: Int = TCPFraming.defaultMax)
    /// Messages end with `delimiter`, which is not part of the message
    /// (`{ delimiter = "\r\n" }`).
    case delimiter([UInt8], max: Int = TCPFraming.defaultMax)
    /// Every message is exactly this many bytes (`{ fixed = N }`).
    case fixed(Int)
    /// Every message follows a binary length header (`{ length = B, ... }`).
    case length(LengthPrefix)
    /// No framing: every chunk is delivered as it arrived from the network (`"raw"`).
    case raw
    /// A decoder written by the user (the Lua `framing` function); `send` writes messages
    /// as they are, since the script frames them itself.
    case custom(CustomFraming)

    /// A fresh decoder for one connection.
    public func makeDecoder() -> any MessageDecoder {
        switch self {
        case .line(let max):
            return DelimiterDecoder(delimiter: [UInt8(ascii: "\n")], stripCarriageReturn: true, max: max)
        case .delimiter(let delimiter, let max):
            return DelimiterDecoder(delimiter: delimiter, stripCarriageReturn: false, max: max)
        case .fixed(let size):
            return FixedLengthDecoder(size: size)
        case .length(let prefix):
            return LengthPrefixDecoder(prefix)
        case .raw:
            return RawDecoder()
        case .custom(let custom):
            return ClosureDecoder(custom.decode)
        }
    }

    /// Checks the parameters, so a bad option is reported when the connection is made and
    /// not when the first message arrives.
    public func validate() throws(UsageError) {
        switch self {
        case .line(let max), .delimiter(_, let max):
            guard max > 0 else { throw .nonPositiveMax }
            if case .delimiter(let bytes, _) = self, bytes.isEmpty {
                throw .emptyDelimiter
            }
        case .fixed(let size):
            guard size > 0 else { throw .nonPositiveFixedSize(size) }
        case .length(let prefix):
            try prefix.validate()
        case .raw, .custom:
            break
        }
    }

    /// `line`, `delimiter "\r\n"`, `fixed 16`, `length 4 big`, ... for logs.
    public var description: String {
        switch self {
        case .line: return "line"
        case .delimiter(let bytes, _): return "delimiter \(String(decoding: bytes, as: UTF8.self).debugDescription)"
        case .fixed(let size): return "fixed \(size)"
        case .length(let prefix): return "length \(prefix.bytes) \(prefix.endian)"
        case .raw: return "raw"
        case .custom: return "custom"
        }
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
public final class CustomFraming: @unchecked Sendable, Hashable {
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
}
