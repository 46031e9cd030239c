import Foundation

/// Hex and base64 text forms of binary data, as `mw.hex` / `mw.base64` expose them.
///
/// ```swift
/// BinaryText.hex([0xde, 0xad])          // "dead"
/// try BinaryText.unhex("DEAD")          // [0xde, 0xad]
/// BinaryText.base64(Array("hi".utf8))   // "aGk="
/// ```
public enum BinaryText {
    public struct DecodeError: Error, CustomStringConvertible, Equatable {
        public let description: String
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Lower-case hex, two digits per byte.
    public static func hex<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            var i = 0
            for b in bytes {
                out[i] = hexDigits[Int(b >> 4)]
                out[i + 1] = hexDigits[Int(b & 0xf)]
                i += 2
            }
            return i
        }
    }

    /// Decodes hex digits of either case; white space between bytes is allowed.
    public static func unhex<Text: Collection>(_ text: Text) throws(DecodeError) -> [UInt8] where Text.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(text.count / 2)
        var high: UInt8?
        for (offset, c) in text.enumerated() {
            if high == nil && (c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d) { continue }
            guard let v = hexValue(c) else {
                throw DecodeError(description: "invalid hex digit at offset \(offset)")
            }
            if let h = high {
                out.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        guard high == nil else { throw DecodeError(description: "odd number of hex digits") }
        return out
    }

    /// Standard base64 with padding (RFC 4648 §4).
    public static func base64<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        Data(bytes).base64EncodedString()
    }

    /// Decodes standard or URL-safe base64; padding is optional, white space is skipped.
    public static func unbase64<Text: Collection>(_ text: Text) throws(DecodeError) -> [UInt8] where Text.Element == UInt8 {
        // Foundation wants the standard alphabet with padding; tokens in the wild
        // come URL-safe and unpadded too.
        var normal: [UInt8] = []
        normal.reserveCapacity(text.count + 2)
        for c in text {
            switch c {
            case 0x20, 0x09, 0x0a, 0x0d: continue
            case UInt8(ascii: "-"): normal.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): normal.append(UInt8(ascii: "/"))
            default: normal.append(c)
            }
        }
        if normal.count % 4 != 0 && !normal.contains(UInt8(ascii: "=")) {
            normal.append(contentsOf: repeatElement(UInt8(ascii: "="), count: 4 - normal.count % 4))
        }
        guard let data = Data(base64Encoded: Data(normal)) else {
            throw DecodeError(description: "invalid base64 input")
        }
        return Array(data)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
