#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// Decodes `"line"` and `{ delimiter = ... }` framing: a message is everything up to the
/// delimiter, which is dropped; in line mode a `\r` right before the `\n` is dropped too.
///
/// The search resumes where the previous call stopped (minus a delimiter's length, in
/// case one straddles two reads), so a long message arriving in small reads costs linear
/// time. Once more than `max` bytes have arrived without a delimiter the stream is
/// refused: no message can come out of it within the limit.
///
/// ```swift
/// var crlf = DelimiterDecoder(delimiter: Array("\r\n".utf8), stripCarriageReturn: false, max: 1024)
/// ```
public struct DelimiterDecoder: MessageDecoder {
    private let delimiter: [UInt8]
    private let stripCarriageReturn: Bool
    private let max: Int
    /// Readable bytes already searched without finding the delimiter.
    private var searched = 0

    /// Creates a decoder; `delimiter` must not be empty.
    public init(delimiter: [UInt8], stripCarriageReturn: Bool, max: Int) {
        precondition(!delimiter.isEmpty, "empty delimiter")
        self.delimiter = delimiter
        self.stripCarriageReturn = stripCarriageReturn
        self.max = max
    }

    public mutating func decode(_ buffer: inout ByteBuffer) throws(TCPFramingError) -> ByteBuffer? {
        let start = Swift.max(0, self.searched - (self.delimiter.count - 1))
        guard let found = self.find(in: buffer, from: start) else {
            self.searched = buffer.readableBytes
            // The shortest message these bytes can still end: all but a partial delimiter.
            let shortest = buffer.readableBytes - (self.delimiter.count - 1)
            if shortest > self.max + (self.stripCarriageReturn ? 1 : 0) {
                throw .tooBig("no \(self.name) end within \(shortest) bytes", max: self.max)
            }
            return nil
        }
        self.searched = 0
        var length = found
        if self.stripCarriageReturn, length > 0, buffer.getInteger(at: buffer.readerIndex + length - 1, as: UInt8.self) == UInt8(ascii: "\r") {
            length -= 1
        }
        guard length <= self.max else {
            throw .tooBig("\(self.name) of \(length) bytes", max: self.max)
        }
        let message = buffer.getSlice(at: buffer.readerIndex, length: length)!
        buffer.moveReaderIndex(forwardBy: found + self.delimiter.count)
        return message
    }

    private var name: String { self.stripCarriageReturn ? "line" : "delimited message" }

    /// The offset of the first delimiter at or after `from`, relative to the reader index.
    private func find(in buffer: ByteBuffer, from: Int) -> Int? {
        buffer.withUnsafeReadableBytes { bytes -> Int? in
            guard let base = bytes.baseAddress else { return nil }
            let first = Int32(self.delimiter[0])
            let count = bytes.count
            let rest = self.delimiter.count - 1
            var position = from
            while position + rest < count {
                guard let hit = memchr(base + position, first, count - rest - position) else { return nil }
                let offset = base.distance(to: UnsafeRawPointer(hit))
                if rest == 0 { return offset }
                var matches = true
                for i in 1...rest where bytes[offset + i] != self.delimiter[i] {
                    matches = false
                    break
                }
                if matches { return offset }
                position = offset + 1
            }
            return nil
        }
    }
}

/// `"line"` (`\n`, a `\r` before it dropped) and `{ delimiter = S }`: a message is
/// everything up to the delimiter; `send` appends it, and refuses a message holding it.
public struct DelimiterFraming: FramingMode {
    public let delimiter: [UInt8]
    /// Line mode: a `\r` right before the `\n` is dropped.
    public let stripCarriageReturn: Bool
    /// The longest message waited for.
    public let max: Int

    public init(delimiter: [UInt8], stripCarriageReturn: Bool, max: Int) {
        self.delimiter = delimiter
        self.stripCarriageReturn = stripCarriageReturn
        self.max = max
    }

    public func makeDecoder() -> any MessageDecoder {
        DelimiterDecoder(delimiter: delimiter, stripCarriageReturn: stripCarriageReturn, max: max)
    }

    public func encode(_ message: ByteBuffer, allocator: ByteBufferAllocator) throws(UsageError) -> ByteBuffer {
        if message.readableBytesView.firstRange(of: delimiter) != nil {
            throw .containsDelimiter(framing: stripCarriageReturn ? "line framing" : "delimiter framing", delimiter: delimiter)
        }
        var out = allocator.buffer(capacity: message.readableBytes + delimiter.count)
        out.writeImmutableBuffer(message)
        out.writeBytes(delimiter)
        return out
    }

    public func validate() throws(UsageError) {
        guard max > 0 else { throw .nonPositiveMax }
        guard !delimiter.isEmpty else { throw .emptyDelimiter }
    }

    public var description: String {
        stripCarriageReturn ? "line" : "delimiter \(String(decoding: delimiter, as: UTF8.self).debugDescription)"
    }
}
