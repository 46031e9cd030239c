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
public struct TCPFraming: Sendable, Hashable, CustomStringConvertible {
    /// The default limit of a line or delimited message, as `max_message`'s default.
    public static let defaultMax = 16 * 1024 * 1024

    /// The framing itself: its decoder, encoder and checks.
    public let mode: any FramingMode

    /// Frames with `mode`.
    public init(_ mode: some FramingMode) {
        self.mode = mode
    }

    /// Messages end with `\n`; a `\r` before it is dropped (`"line"`). A line longer than
    /// `max` bytes without its end is a framing error.
    public static func line(max: Int = TCPFraming.defaultMax) -> TCPFraming {
        TCPFraming(DelimiterFraming(delimiter: [UInt8(ascii: "\n")], stripCarriageReturn: true, max: max))
    }
    /// Messages end with `delimiter`, which is not part of the message
    /// (`{ delimiter = "\r\n" }`).
    public static func delimiter(_ delimiter: [UInt8], max: Int = TCPFraming.defaultMax) -> TCPFraming {
        TCPFraming(DelimiterFraming(delimiter: delimiter, stripCarriageReturn: false, max: max))
    }
    /// Every message is exactly this many bytes (`{ fixed = N }`).
    public static func fixed(_ size: Int) -> TCPFraming { TCPFraming(FixedFraming(size: size)) }
    /// Every message follows a binary length header (`{ length = B, ... }`).
    public static func length(_ prefix: LengthPrefix) -> TCPFraming { TCPFraming(prefix) }
    /// No framing: every chunk is delivered as it arrived from the network (`"raw"`).
    public static let raw = TCPFraming(RawFraming())
    /// A decoder written by the user (the Lua `framing` function); `send` writes messages
    /// as they are, since the script frames them itself.
    public static func custom(_ custom: CustomFraming) -> TCPFraming { TCPFraming(custom) }

    /// Is it a user's decoding function (``CustomFraming``)?
    public var isCustom: Bool { mode is CustomFraming }

    /// A fresh decoder for one connection.
    public func makeDecoder() -> any MessageDecoder { mode.makeDecoder() }

    /// Checks the parameters, so a bad option is reported when the connection is made and
    /// not when the first message arrives.
    public func validate() throws(UsageError) { try mode.validate() }

    /// `line`, `delimiter "\r\n"`, `fixed 16`, `length 4 big`, ... for logs.
    public var description: String { mode.description }

    public static func == (lhs: TCPFraming, rhs: TCPFraming) -> Bool { AnyHashable(lhs.mode) == AnyHashable(rhs.mode) }

    public func hash(into hasher: inout Hasher) { hasher.combine(AnyHashable(mode)) }
}

/// One way of cutting a byte stream into messages. Each framing is one type in a file of
/// its own (its decoder beside it: ``DelimiterFraming``, ``FixedFraming``, ``LengthPrefix``,
/// ``RawFraming``, ``CustomFraming``); the Lua syntax and the `--framing` flag of each
/// are one entry of the framing table of the Lua layer (`LuaFraming.all`). Adding a
/// framing touches those two files only.
///
/// ```swift
/// struct NulFraming: FramingMode {
///     var description: String { "nul" }
///     func makeDecoder() -> any MessageDecoder { DelimiterDecoder(delimiter: [0], stripCarriageReturn: false, max: 1 << 20) }
///     func encode(_ message: ByteBuffer, allocator: ByteBufferAllocator) throws(UsageError) -> ByteBuffer {
///         try DelimiterFraming(delimiter: [0], stripCarriageReturn: false, max: 1 << 20).encode(message, allocator: allocator)
///     }
/// }
/// let framing = TCPFraming(NulFraming())
/// ```
public protocol FramingMode: Sendable, Hashable, CustomStringConvertible {
    /// A fresh decoder for one connection.
    func makeDecoder() -> any MessageDecoder
    /// The bytes `send` writes for `message`, or a usage error for a message the peer's
    /// decoder would cut differently (``MessageEncoder``).
    func encode(_ message: ByteBuffer, allocator: ByteBufferAllocator) throws(UsageError) -> ByteBuffer
    /// Throws for parameters that cannot work (checked when the connection is made).
    func validate() throws(UsageError)
}

extension FramingMode {
    /// No parameters to check.
    public func validate() throws(UsageError) {}
}

/// `"raw"`: whatever arrived is a message; sent as it is.
public struct RawFraming: FramingMode {
    public init() {}
    public func makeDecoder() -> any MessageDecoder { RawDecoder() }
    public func encode(_ message: ByteBuffer, allocator: ByteBufferAllocator) throws(UsageError) -> ByteBuffer { message }
    public var description: String { "raw" }
}

