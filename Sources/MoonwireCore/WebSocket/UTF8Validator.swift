import NIOCore

/// An incremental UTF-8 validator (RFC 3629) that can be fed a message in arbitrary chunks.
///
/// WebSocket text messages may be split across frames and frames across reads, and a
/// sequence may straddle any of those boundaries. The validator keeps the partial sequence
/// between calls, so a message can be rejected as soon as the first impossible byte arrives
/// instead of after the whole message was buffered.
///
/// ```swift
/// var v = UTF8Validator()
/// guard v.feed(firstChunk), v.feed(secondChunk), v.isComplete else { /* close 1007 */ }
/// ```
public struct UTF8Validator: Sendable, Equatable {
    /// Continuation bytes still expected for the current sequence; 0 between characters.
    private var remaining: UInt8 = 0
    /// Inclusive range allowed for the next byte. Only the second byte of a sequence has a
    /// narrower range than 0x80...0xBF: that is where overlong forms, surrogates and code
    /// points above U+10FFFF are excluded.
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    /// Creates a validator positioned at the start of a text.
    public init() {}

    /// True when everything fed so far ends on a character boundary.
    public var isComplete: Bool { self.remaining == 0 }

    /// Forgets any partial sequence, for reuse on the next message.
    public mutating func reset() {
        self = UTF8Validator()
    }

    /// Feeds the readable bytes of `buffer`; returns false at the first byte that cannot
    /// continue a valid UTF-8 text. After a false result the validator's state is unspecified.
    public mutating func feed(_ buffer: ByteBuffer) -> Bool {
        buffer.withUnsafeReadableBytes { self.feed($0) }
    }

    /// Feeds raw bytes; see ``feed(_:)-(ByteBuffer)``.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let count = bytes.count
        var i = 0
        while i < count {
            if self.remaining == 0 {
                // ASCII dominates real traffic: skip it 32 bytes, then a word, at a time.
                while i + 32 <= count {
                    let a = bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                    let b = bytes.loadUnaligned(fromByteOffset: i + 8, as: UInt64.self)
                    let c = bytes.loadUnaligned(fromByteOffset: i + 16, as: UInt64.self)
                    let d = bytes.loadUnaligned(fromByteOffset: i + 24, as: UInt64.self)
                    if (a | b | c | d) & 0x8080_8080_8080_8080 != 0 { break }
                    i += 32
                }
                while i + 8 <= count {
                    // Little-endian: the byte at the lowest address is the lowest.
                    let high = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)) & 0x8080_8080_8080_8080
                    if high != 0 {
                        // Straight to the first byte that is not ASCII: going through the
                        // ASCII bytes before it one at a time tried both loops above again
                        // for each (about 25 instructions a byte, before every é or ✓).
                        i += high.trailingZeroBitCount >> 3
                        break
                    }
                    i += 8
                }
                if i == count { break }
                let byte = bytes[i]
                i += 1
                if byte < 0x80 { continue }
                if !self.begin(byte) { return false }
            } else {
                let byte = bytes[i]
                i += 1
                guard byte >= self.lower && byte <= self.upper else { return false }
                self.remaining -= 1
                self.lower = 0x80
                self.upper = 0xBF
            }
        }
        return true
    }

    private mutating func begin(_ lead: UInt8) -> Bool {
        switch lead {
        case 0xC2...0xDF:
            self.remaining = 1
        case 0xE0:
            self.remaining = 2
            self.lower = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF:
            self.remaining = 2
        case 0xED:
            self.remaining = 2
            self.upper = 0x9F
        case 0xF0:
            self.remaining = 3
            self.lower = 0x90
        case 0xF1...0xF3:
            self.remaining = 3
        case 0xF4:
            self.remaining = 3
            self.upper = 0x8F
        default:
            return false
        }
        return true
    }
}
