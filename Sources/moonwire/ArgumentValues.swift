import ArgumentParser
import MoonwireCore

/// Values of `connect` and `listen` flags that need more than a number.
enum ArgumentValues {
    /// `line`, `crlf`, `raw` or `length:N` (an N-byte big-endian length before each message).
    static func framing(_ text: String, max: Int) throws -> TCPFraming {
        let framing: TCPFraming
        switch text.lowercased() {
        case "line": framing = .line(max: max)
        case "crlf": framing = .delimiter([0x0d, 0x0a], max: max)
        case "raw": framing = .raw
        case let other where other.hasPrefix("length:"):
            guard let bytes = Int(other.dropFirst(7)) else { fallthrough }
            framing = .length(LengthPrefix(bytes: bytes, endian: .big, max: max))
        default:
            throw ValidationError("--framing '\(text)' is not a framing; use line, crlf, raw or length:N (N = 1, 2, 4 or 8)")
        }
        do {
            try framing.validate()
        } catch {
            throw ValidationError("--framing '\(text)': \(error); use line, crlf, raw or length:N (N = 1, 2, 4 or 8)")
        }
        return framing
    }

    /// `65536`, `64K`, `16M`: a size in bytes.
    static func size(_ text: String, flag: String) throws -> Int {
        let units: [Character: Int] = ["k": 1 << 10, "m": 1 << 20, "g": 1 << 30]
        var digits = Substring(text.lowercased())
        var unit = 1
        if let last = digits.last, let scale = units[last] {
            unit = scale
            digits = digits.dropLast()
        }
        guard let value = Int(digits), value > 0, value <= Int.max / unit else {
            throw ValidationError("\(flag) '\(text)' is not a size; give bytes, such as 65536, 64K or 16M")
        }
        return value * unit
    }

    /// A limit's size: nil when the flag was not given, 0 for "no limit", else as ``size(_:flag:)``.
    static func limit(_ text: String?, flag: String) throws -> Int? {
        guard let text else { return nil }
        return text == "0" ? 0 : try size(text, flag: flag)
    }

    /// A number of seconds, 0 or more.
    static func seconds(_ value: Double, flag: String) throws -> Double {
        guard value >= 0, !value.isNaN else {
            throw ValidationError("\(flag) must be a number of seconds, 0 or more")
        }
        return value
    }
}
