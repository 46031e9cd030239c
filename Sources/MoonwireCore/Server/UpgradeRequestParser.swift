#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOHTTP1

/// The head of an HTTP/1.x request as a WebSocket server reads it: the request line and
/// the header fields, in the order they came.
struct UpgradeRequest {
    var method: String
    /// The request target as sent (`/chat?room=1`).
    var target: String
    var version: HTTPVersion
    var headers: HTTPHeaders
}

/// Reads the head of an HTTP/1.1 request (RFC 9112 §2–5) from the bytes of a connection,
/// as they arrive, in bounded memory: the request line, then header fields, up to the
/// blank line. Each complete line is parsed where it lies in the read buffer; only an
/// unfinished line is carried over to the next read. Whatever follows the head (a
/// client's first WebSocket frames) is left in the buffer for the caller.
///
/// Bounds: at most `maxFields` header fields and `maxBytes` of their names and values
/// together (a flood is refused while it is being parsed, before it is kept anywhere),
/// and no line longer than `maxBytes`.
///
/// ```swift
/// var parser = UpgradeRequestParser(maxFields: 128, maxBytes: 80 * 1024)
/// if let request = try parser.parse(&buffer) { ... }   // nil: the head is not complete yet
/// ```
struct UpgradeRequestParser {
    /// Why a request head was refused.
    enum Failure: Error, Equatable {
        /// Not an HTTP/1.x request head (400), in words.
        case malformed(String)
        /// More than `maxFields` header fields or `maxBytes` of them (431).
        case tooManyHeaders
        /// A request line longer than `maxBytes` (400).
        case requestLineTooLong
    }

    let maxFields: Int
    let maxBytes: Int
    /// An unfinished line from the last read.
    private var carried: ByteBuffer?
    private var requestLine: (method: String, target: String, version: HTTPVersion)?
    private var headers = HTTPHeaders()
    private var fieldBytes = 0
    private var emptyLinesBefore = 0

    init(maxFields: Int, maxBytes: Int) {
        self.maxFields = maxFields
        self.maxBytes = maxBytes
    }

    /// Takes what `buffer` holds of the head: the request once its blank line is in,
    /// `buffer` then holding the bytes that followed it; nil while more is needed (all of
    /// `buffer` was taken).
    mutating func parse(_ buffer: inout ByteBuffer) throws(Failure) -> UpgradeRequest? {
        if var carried = self.carried {
            self.carried = nil
            carried.writeBuffer(&buffer)
            buffer = carried
        }
        while true {
            let end = buffer.withUnsafeReadableBytes { bytes -> Int? in
                guard let base = bytes.baseAddress, let found = memchr(base, 0x0A, bytes.count) else { return nil }
                return base.distance(to: UnsafeRawPointer(found))
            }
            guard let end else {
                // RFC 9112 §2.2: a line is at most as long as the bounds allow.
                if buffer.readableBytes > self.maxBytes { throw self.lineTooLong }
                if buffer.readableBytes > 0 {
                    self.carried = buffer.readSlice(length: buffer.readableBytes)
                }
                return nil
            }
            if end > self.maxBytes { throw self.lineTooLong }
            let done = try buffer.withUnsafeReadableBytes { bytes throws(Failure) -> Bool in
                try self.take(line: UnsafeRawBufferPointer(rebasing: bytes[..<end]))
            }
            buffer.moveReaderIndex(forwardBy: end + 1)
            if done, let line = self.requestLine {
                return UpgradeRequest(method: line.method, target: line.target, version: line.version, headers: self.headers)
            }
        }
    }

    private var lineTooLong: Failure {
        self.requestLine == nil ? .requestLineTooLong : .tooManyHeaders
    }

    /// One line without its LF; true for the blank line that ends the head.
    private mutating func take(line: UnsafeRawBufferPointer) throws(Failure) -> Bool {
        guard line.last == 13 else { throw .malformed("a line that does not end in CR LF") }
        let content = UnsafeRawBufferPointer(rebasing: line.dropLast())
        guard self.requestLine != nil else {
            if content.isEmpty {
                // RFC 9112 §2.2: a server should ignore an empty line or two before the request.
                self.emptyLinesBefore += 1
                guard self.emptyLinesBefore <= 2 else { throw .malformed("empty lines instead of a request line") }
                return false
            }
            self.requestLine = try Self.requestLine(content)
            return false
        }
        if content.isEmpty { return true }
        try self.field(content)
        return false
    }

    /// `method SP request-target SP HTTP-version` (RFC 9112 §3).
    private static func requestLine(_ line: UnsafeRawBufferPointer) throws(Failure) -> (method: String, target: String, version: HTTPVersion) {
        let parts = line.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("not a request line: method, target and HTTP version") }
        let method = parts[0], target = parts[1], version = parts[2]
        guard !method.isEmpty, method.allSatisfy(Self.isTokenByte) else { throw .malformed("not a method") }
        guard !target.isEmpty, target.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else { throw .malformed("not a request target") }
        // HTTP-version = "HTTP/" DIGIT "." DIGIT
        guard version.count == 8, version.starts(with: "HTTP/".utf8), version[version.startIndex + 6] == UInt8(ascii: "."),
              let major = Self.digit(version[version.startIndex + 5]), let minor = Self.digit(version[version.startIndex + 7])
        else { throw .malformed("not an HTTP version") }
        return (String(decoding: method, as: UTF8.self), String(decoding: target, as: UTF8.self), HTTPVersion(major: major, minor: minor))
    }

    /// `field-name ":" OWS field-value OWS` (RFC 9112 §5), counted against the bounds.
    private mutating func field(_ line: UnsafeRawBufferPointer) throws(Failure) {
        guard self.headers.count < self.maxFields else { throw .tooManyHeaders }
        // Obsolete line folding (RFC 9112 §5.2): a server may reject it, and we do.
        guard line[0] != 0x20 && line[0] != 0x09 else { throw .malformed("a header line folded onto the next") }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .malformed("a header line without a colon") }
        let name = line[..<colon]
        // No white space between the name and the colon (RFC 9112 §5.1).
        guard !name.isEmpty, name.allSatisfy(Self.isTokenByte) else { throw .malformed("not a header name") }
        var value = line[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
        // Field values (RFC 9110 §5.5): visible characters, spaces and tabs, obs-text.
        guard value.allSatisfy({ $0 >= 0x20 || $0 == 0x09 }), !value.contains(0x7F) else {
            throw .malformed("a control character in a header value")
        }
        self.fieldBytes += name.count + value.count
        guard self.fieldBytes <= self.maxBytes else { throw .tooManyHeaders }
        self.headers.add(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
    }

    private static func digit(_ byte: UInt8) -> Int? {
        (0x30...0x39).contains(byte) ? Int(byte - 0x30) : nil
    }

    /// tchar (RFC 9110 §5.6.2).
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}
