import NIOCore
import Testing

@testable import MoonwireCore

/// Decodes `chunks` in order and returns the messages as strings, or the error.
private func decode(_ framing: TCPFraming, _ chunks: [[UInt8]]) throws -> [String] {
    var reader = MessageReader(framing.makeDecoder())
    var out: [String] = []
    for chunk in chunks {
        reader.append(ByteBuffer(bytes: chunk))
        while let message = try reader.next() {
            out.append(String(decoding: message.readableBytesView, as: UTF8.self))
        }
    }
    return out
}

/// Every way of cutting `wire` in two, plus one read per byte, plus all at once.
private func splits(_ wire: [UInt8]) -> [[[UInt8]]] {
    var result: [[[UInt8]]] = [[wire], wire.map { [$0] }]
    for cut in 1..<wire.count {
        result.append([Array(wire[..<cut]), Array(wire[cut...])])
    }
    return result
}

private func wire(_ framing: TCPFraming, _ messages: [String]) throws -> [UInt8] {
    let encoder = MessageEncoder(framing)
    return try messages.flatMap { Array(try encoder.encode(ByteBuffer(string: $0)).readableBytesView) }
}

@Suite(.timeLimit(.minutes(5))) struct FramingTests {
    static let modes: [(String, TCPFraming)] = [
        ("line", .line()),
        ("delimiter", .delimiter(Array("\r\n".utf8))),
        ("long delimiter", .delimiter(Array("<END>".utf8))),
        ("length 1", .length(LengthPrefix(bytes: 1))),
        ("length 2 big", .length(LengthPrefix(bytes: 2, endian: .big))),
        ("length 4 little", .length(LengthPrefix(bytes: 4, endian: .little))),
        ("length 8 big", .length(LengthPrefix(bytes: 8, endian: .big))),
        ("length 4 adjusted", .length(LengthPrefix(bytes: 4, endian: .big, adjust: -4))),
    ]

    @Test(arguments: 0..<modes.count)
    func everySplitGivesTheSameMessages(_ index: Int) throws {
        let framing = Self.modes[index].1
        let messages = ["abc", "", "da", "bcdabcd", "x", String(repeating: "é", count: 40)]
        let bytes = try wire(framing, messages)
        for chunks in splits(bytes) {
            #expect(try decode(framing, chunks) == messages, "\(Self.modes[index].0) split as \(chunks.map(\.count))")
        }
    }

    @Test func seedsStickyPacketsInLineMode() throws {
        // The seed's case: "abc\n" then "da", "bcd\nabcd\n" glued and split anywhere.
        #expect(try decode(.line(), [Array("abc\nda".utf8), Array("bcd\nabcd\n".utf8)]) == ["abc", "dabcd", "abcd"])
        #expect(try decode(.line(), [Array("a\r\nb\n\r\n".utf8)]) == ["a", "b", ""])
    }

    @Test func fixedFramingCutsAtTheSize() throws {
        for chunks in splits(Array("abcdabcdabcd".utf8)) {
            #expect(try decode(.fixed(4), chunks) == ["abcd", "abcd", "abcd"])
        }
        #expect(try decode(.fixed(4), [Array("abcdab".utf8)]) == ["abcd"])
    }

    @Test func rawDeliversChunksAsTheyArrive() throws {
        #expect(try decode(.raw, [Array("ab".utf8), Array("cde".utf8)]) == ["ab", "cde"])
    }

    @Test func burstsOfGluedMessages() throws {
        // Many messages in reads of a size that never matches a boundary.
        let framing = TCPFraming.length(LengthPrefix(bytes: 2))
        let messages = (0..<200).map { "message-\($0)-" + String(repeating: "z", count: $0 % 17) }
        let bytes = try wire(framing, messages)
        for size in [1, 3, 7, 64, 1000] {
            let chunks = stride(from: 0, to: bytes.count, by: size).map { Array(bytes[$0..<min($0 + size, bytes.count)]) }
            #expect(try decode(framing, chunks) == messages)
        }
    }

    @Test func lengthHeaderAboveMaxFailsOnTheHeaderAlone() throws {
        let framing = TCPFraming.length(LengthPrefix(bytes: 4, endian: .big, max: 1024))
        // Only the header has arrived: it is refused at once, with the 1009 code.
        #expect {
            try decode(framing, [[0x7F, 0xFF, 0xFF, 0xFF]])
        } throws: { error in
            let error = error as! TCPFramingError
            return error.closeCode == 1009 && error.message.contains("2147483647") && error.message.contains("1024")
        }
        // An 8-byte header beyond Int.max, and a negative adjusted length.
        #expect(throws: TCPFramingError.self) {
            try decode(.length(LengthPrefix(bytes: 8)), [[0xFF, 0, 0, 0, 0, 0, 0, 0]])
        }
        #expect(throws: TCPFramingError.self) {
            try decode(.length(LengthPrefix(bytes: 1, adjust: -4)), [[2]])
        }
    }

    @Test func lengthAtMaxIsAccepted() throws {
        let framing = TCPFraming.length(LengthPrefix(bytes: 2, max: 3))
        #expect(try decode(framing, [[0, 3] + Array("abc".utf8)]) == ["abc"])
    }

    @Test func linesLongerThanMaxFail() throws {
        // 10 bytes without a newline under max 8: refused before the line ends.
        #expect(throws: TCPFramingError.self) {
            try decode(.line(max: 8), [Array("0123456789".utf8)])
        }
        #expect(try decode(.line(max: 8), [Array("01234567\r\n".utf8)]) == ["01234567"])
        #expect(throws: TCPFramingError.self) {
            try decode(.delimiter([0], max: 2), [Array("abc".utf8), [0]])
        }
    }

    @Test func encodersRefuseWhatTheirDecoderWouldCutDifferently() throws {
        #expect(throws: UsageError.containsDelimiter(framing: "line framing", delimiter: [0x0A])) {
            try MessageEncoder(.line()).encode(ByteBuffer(string: "a\nb"))
        }
        #expect(throws: UsageError.wrongFixedSize(3, framing: 4)) { try MessageEncoder(.fixed(4)).encode(ByteBuffer(string: "abc")) }
        #expect(throws: UsageError.tooLongForLengthHeader(256, prefix: LengthPrefix(bytes: 1))) {
            try MessageEncoder(.length(LengthPrefix(bytes: 1))).encode(ByteBuffer(repeating: 0, count: 256))
        }
        // What a script's `nil, err` says.
        #expect(UsageError.containsDelimiter(framing: "line framing", delimiter: [0x0A]).description
            == #"line framing: the message contains the delimiter "\n"; it would arrive as two messages"#)
        #expect(UsageError.wrongFixedSize(3, framing: 4).description == "fixed framing sends exactly 4 bytes, got 3")
        #expect(UsageError.tooLongForLengthHeader(256, prefix: LengthPrefix(bytes: 1)).description
            == "a 256-byte message does not fit a 1-byte length header (adjust 0)")
        let framed = try MessageEncoder(.length(LengthPrefix(bytes: 2, endian: .little, adjust: 2))).encode(ByteBuffer(string: "abcd"))
        #expect(Array(framed.readableBytesView) == [2, 0] + Array("abcd".utf8))
    }

    @Test func customFramingFunctionPlugsIn() throws {
        // NUL-terminated messages, as a Lua framing function would cut them.
        let custom = CustomFraming { buffer in
            guard let end = buffer.readableBytesView.firstIndex(of: 0) else { return nil }
            let message = buffer.readSlice(length: end - buffer.readerIndex)
            buffer.moveReaderIndex(forwardBy: 1)
            return message
        }
        for chunks in splits(Array("ab\0\0cde\0".utf8)) {
            #expect(try decode(.custom(custom), chunks) == ["ab", "", "cde"])
        }
        let lazy = CustomFraming { buffer in buffer.getSlice(at: buffer.readerIndex, length: 1) }
        #expect(throws: TCPFramingError.self) { try decode(.custom(lazy), [[1]]) }
    }

    @Test func invalidOptionsAreUsageErrors() {
        #expect(throws: UsageError.lengthHeaderSize(3)) { try TCPFraming.length(LengthPrefix(bytes: 3)).validate() }
        #expect(throws: UsageError.nonPositiveFixedSize(0)) { try TCPFraming.fixed(0).validate() }
        #expect(throws: UsageError.emptyDelimiter) { try TCPFraming.delimiter([]).validate() }
        #expect(UsageError.lengthHeaderSize(3).description == "length framing needs a header of 1, 2, 4 or 8 bytes, got 3")
    }
}

/// A framing is one type (``FramingMode``): nothing else in Core names it. This one,
/// declared here outside the module, frames, cuts split and glued reads, refuses what
/// it cannot carry and checks its parameters like the built-in ones. To offer it to
/// scripts and `--framing`, one entry in the framing table of the Lua layer
/// (Sources/MoonwireLua/LuaFraming.swift) is the only other change.
private struct NulFraming: FramingMode {
    var max = 64
    var description: String { "nul" }
    func makeDecoder() -> any MessageDecoder { DelimiterDecoder(delimiter: [0], stripCarriageReturn: false, max: max) }
    func encode(_ message: ByteBuffer, allocator: ByteBufferAllocator) throws(UsageError) -> ByteBuffer {
        try DelimiterFraming(delimiter: [0], stripCarriageReturn: false, max: max).encode(message, allocator: allocator)
    }
    func validate() throws(UsageError) {
        guard max > 0 else { throw .nonPositiveMax }
    }
}

@Suite struct FramingModeTests {
    @Test func aFramingDeclaredOutsideCoreFramesBothWays() throws {
        let framing = TCPFraming(NulFraming())
        let encoder = MessageEncoder(framing)
        let wire = try ["ab", "", "cde"].flatMap { Array(try encoder.encode(ByteBuffer(string: $0)).readableBytesView) }
        #expect(wire == Array("ab\0\0cde\0".utf8))
        for chunks in splits(wire) {
            #expect(try decode(framing, chunks) == ["ab", "", "cde"])
        }
        #expect(throws: UsageError.self) { try encoder.encode(ByteBuffer(bytes: [1, 0, 2])) }
        #expect(throws: UsageError.nonPositiveMax) { try TCPFraming(NulFraming(max: 0)).validate() }
        #expect(framing.description == "nul")
        #expect(framing == TCPFraming(NulFraming()) && framing != .line() && framing != TCPFraming(NulFraming(max: 3)))
    }
}
