import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `run --start-at TIME`: the wall-clock instant every shard's load schedule
/// begins at, so that shards started seconds apart by their engine load the
/// target over the same window.
public enum StartAt {
    /// Further away than this is a typo (milliseconds given for seconds, a wrong year).
    public static let horizon = 24.0 * 3600

    public struct ParseError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Seconds since 1970 (UTC) from, relative to `now` (seconds since 1970):
    /// - RFC 3339: `2026-11-26T22:00:00Z`, `2026-11-26T23:00:00.250+01:00`;
    /// - epoch seconds, as `date +%s` or `date +%s.%N` print them, with or without `@`;
    /// - `+N` with `s`, `ms` or `m`: that long after `now`.
    ///
    /// ```swift
    /// try StartAt.parse("2026-11-26T22:00:00Z", now: Date().timeIntervalSince1970)  // 1795730400
    /// try StartAt.parse("+5s", now: 100)                                             // 105
    /// ```
    public static func parse(_ text: String, now: Double) throws(ParseError) -> Double {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let at: Double
        if trimmed.hasPrefix("+") {
            guard let d = relative(trimmed.dropFirst()) else {
                throw ParseError(description: "'\(text)' is not a time: write +5s, +500ms or +2m after a +")
            }
            at = now + d
        } else if let epoch = epochSeconds(trimmed.hasPrefix("@") ? Substring(trimmed.dropFirst()) : Substring(trimmed)) {
            at = epoch
        } else if let date = rfc3339(trimmed) {
            at = date
        } else {
            throw ParseError(description: "'\(text)' is not a time: give RFC 3339 (2026-11-26T22:00:00Z), epoch seconds (date +%s) or +5s")
        }
        guard abs(at - now) <= horizon else {
            let hours = Int(((at - now) / 3600).rounded())
            throw ParseError(description: "'\(text)' is \(hours) h from now: give an instant within a day (epoch seconds, not milliseconds)")
        }
        return at
    }

    /// RFC 3339 of `seconds` since 1970, UTC, to the microsecond: how files and messages show an instant.
    public static func format(_ seconds: Double) -> String {
        var whole = time_t(seconds.rounded(.down))
        var micro = Int(((seconds - Double(whole)) * 1e6).rounded())
        if micro == 1_000_000 {
            whole += 1
            micro = 0
        }
        var parts = tm()
        gmtime_r(&whole, &parts)
        let frac = String(micro)
        let date = String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
        return date + "." + String(repeating: "0", count: 6 - frac.count) + frac + "Z"
    }

    private static func relative(_ text: Substring) -> Double? {
        for (suffix, scale) in [("ms", 1e-3), ("s", 1.0), ("m", 60.0)] where text.hasSuffix(suffix) {
            guard let n = Double(text.dropLast(suffix.count)), n >= 0, n.isFinite else { return nil }
            return n * scale
        }
        return nil
    }

    private static func epochSeconds(_ text: Substring) -> Double? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), let n = Double(text) else { return nil }
        return n
    }

    /// `YYYY-MM-DD(T|t| )HH:MM:SS[.fraction](Z|z|+HH:MM|-HH:MM)`, exactly.
    private static func rfc3339(_ text: String) -> Double? {
        let b = Array(text.utf8)
        func digits(_ at: Int, _ n: Int) -> Int? {
            guard at + n <= b.count else { return nil }
            var v = 0
            for i in at..<at + n {
                guard (48...57).contains(b[i]) else { return nil }
                v = v * 10 + Int(b[i] - 48)
            }
            return v
        }
        guard b.count >= 20, let year = digits(0, 4), b[4] == UInt8(ascii: "-"), let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
            let day = digits(8, 2), [UInt8(ascii: "T"), UInt8(ascii: "t"), UInt8(ascii: " ")].contains(b[10]),
            let hour = digits(11, 2), b[13] == UInt8(ascii: ":"), let minute = digits(14, 2), b[16] == UInt8(ascii: ":"),
            let second = digits(17, 2), (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        var i = 19
        var fraction = 0.0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            var scale = 0.1
            i += 1
            let first = i
            while i < b.count, (48...57).contains(b[i]) {
                fraction += Double(b[i] - 48) * scale
                scale /= 10
                i += 1
            }
            guard i > first else { return nil }
        }
        guard i < b.count else { return nil }
        var offset = 0
        switch b[i] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            i += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard let h = digits(i + 1, 2), i + 3 < b.count, b[i + 3] == UInt8(ascii: ":"), let m = digits(i + 4, 2), h < 24, m < 60 else { return nil }
            offset = (h * 60 + m) * 60 * (b[i] == UInt8(ascii: "-") ? -1 : 1)
            i += 6
        default:
            return nil
        }
        guard i == b.count else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        return Double(timegm(&parts) - offset) + fraction
    }
}
