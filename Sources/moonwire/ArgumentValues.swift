import ArgumentParser
import MoonwireCore
import MoonwireLua

/// Values of `connect` and `listen` flags that need more than a number.
enum ArgumentValues {
    /// `--framing`: as the framing table of the Lua layer declares it (line, crlf, raw,
    /// length:N, ...).
    static func framing(_ text: String, max: Int) throws -> TCPFraming {
        do {
            return try LuaFraming.fromFlag(text, max: max)
        } catch {
            throw ValidationError(error.description)
        }
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
