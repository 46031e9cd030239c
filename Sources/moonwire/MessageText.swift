import CMoonJSON
import Foundation
import MoonwireCore

/// Text forms of messages for the terminal: hexdumps, re-indented JSON, safe text,
/// JSON string literals.
enum MessageText {
    /// Hexdump lines stop after this many bytes; the rest is counted, not shown.
    static let hexdumpLimit = 4096

    /// `00000000  68 65 6c 6c 6f 0a                                 |hello.|`, 16 bytes a line.
    static func hexdump(_ bytes: [UInt8]) -> [String] {
        var lines: [String] = []
        let shown = bytes.prefix(hexdumpLimit)
        for start in stride(from: 0, to: shown.count, by: 16) {
            let row = shown[start..<min(start + 16, shown.count)]
            var hex = ""
            for (i, byte) in row.enumerated() {
                hex += (i == 8 ? "  " : " ") + BinaryText.hex([byte])
            }
            hex += String(repeating: " ", count: (16 - row.count) * 3 + (row.count <= 8 ? 1 : 0))
            let ascii = String(row.map { (0x20..<0x7f).contains($0) ? Character(UnicodeScalar($0)) : "." })
            lines.append(String(format: "%08x", start) + " " + hex + "  |" + ascii + "|")
        }
        if bytes.count > shown.count {
            lines.append("... \(bytes.count - shown.count) more bytes")
        }
        return lines
    }

    /// UTF-8 text with no control characters but tab and newline: shown as text even when
    /// it came as a TCP message (which has no kind).
    static func looksLikeText(_ bytes: [UInt8]) -> Bool {
        guard String(validating: bytes, as: UTF8.self) != nil else { return false }
        return !bytes.contains { ($0 < 0x20 && $0 != 0x09 && $0 != 0x0a && $0 != 0x0d) || $0 == 0x7f }
    }

    /// The message re-indented with two spaces, keys in their order and numbers as
    /// written, if it is a JSON object or array; nil otherwise. The native codec reads the
    /// frame's bytes (RapidJSON, `mwj_pretty`); strings are re-escaped, control characters
    /// as `\u` escapes.
    static func prettyJSON(_ bytes: [UInt8]) -> String? {
        var out: UnsafeMutablePointer<CChar>?
        var count = 0
        let status = bytes.withUnsafeBufferPointer { raw in
            raw.withMemoryRebound(to: CChar.self) { mwj_pretty($0.baseAddress, $0.count, &out, &count) }
        }
        guard status == MWJ_OK, let out else { return nil }
        defer { free(out) }
        return String(decoding: UnsafeRawBufferPointer(start: out, count: count), as: UTF8.self)
    }

    /// `1000 normal closure` and the like, for close lines.
    static func closeCodeName(_ code: UInt16) -> String? {
        switch code {
        case 1000: return "normal closure"
        case 1001: return "going away"
        case 1002: return "protocol error"
        case 1003: return "unsupported data"
        case 1005: return "no status code"
        case 1006: return "connection lost without a close frame"
        case 1007: return "invalid payload data"
        case 1008: return "policy violation"
        case 1009: return "message too big"
        case 1010: return "missing extension"
        case 1011: return "internal server error"
        case 1012: return "service restart"
        case 1013: return "try again later"
        case 1014: return "bad gateway"
        case 1015: return "TLS handshake failure"
        default: return nil
        }
    }

    /// `1007 (invalid payload data) "bad utf-8"`.
    static func describeClose(code: UInt16, reason: String) -> String {
        var line = "\(code)"
        if let name = closeCodeName(code) { line += " (\(name))" }
        if !reason.isEmpty { line += " " + LogLine.jsonString(reason) }
        return line
    }
}
