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

    /// Text made safe for a terminal: control characters (escape sequences from a peer
    /// could move the cursor or change colours) are written as `\u{1b}` escapes.
    static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x09, 0x0a: out.unicodeScalars.append(scalar)
            case 0..<0x20, 0x7f, 0x80..<0xa0: out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// The message re-indented with two spaces, keys in their order, if it is a JSON
    /// object or array; nil otherwise.
    static func prettyJSON(_ bytes: [UInt8]) -> String? {
        guard let first = bytes.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0a && $0 != 0x0d }),
            first == UInt8(ascii: "{") || first == UInt8(ascii: "["),
            (try? JSONSerialization.jsonObject(with: Data(bytes))) != nil
        else { return nil }
        var out = ""
        var depth = 0
        var inString = false
        var escaped = false
        var text = String(decoding: bytes, as: UTF8.self)[...]
        func newline() { out += "\n" + String(repeating: "  ", count: depth) }
        while let c = text.popFirst() {
            if inString {
                out.append(c)
                if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { inString = false }
                continue
            }
            switch c {
            case "\"":
                inString = true
                out.append(c)
            case "{", "[":
                out.append(c)
                let rest = text.drop { $0.isWhitespace }
                if let next = rest.first, next == "}" || next == "]" {
                    out.append(next)
                    text = rest.dropFirst()
                } else {
                    depth += 1
                    newline()
                }
            case "}", "]":
                depth -= 1
                newline()
                out.append(c)
            case ",":
                out.append(c)
                newline()
            case ":":
                out += ": "
            case " ", "\t", "\n", "\r":
                break
            default:
                out.append(c)
            }
        }
        return out
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
