#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How log lines look: for people (`text`) or for machines (`json`, one object per line).
public enum LogFormat: String, CaseIterable, Sendable {
    case text
    case json
}

/// Renders one log event as one line (without the newline).
///
/// ```swift
/// LogLine.render(level: "info", message: "connected", metadata: ["conn": "#1"], format: .json, colors: false)
/// // {"time":"2026-11-22T14:47:46.123Z","level":"info","message":"connected","conn":"#1"}
/// ```
public enum LogLine {
    public static func render(
        level: String, message: String, metadata: [(String, String)], format: LogFormat, colors: Bool,
        time: timespec = now()
    ) -> String {
        switch format {
        case .json:
            var line = "{\"time\":\"\(timestamp(time, utc: true))\",\"level\":\"\(level)\",\"message\":\(jsonString(message))"
            for (key, value) in metadata {
                line += ",\(jsonString(key)):\(jsonString(value))"
            }
            return line + "}"
        case .text:
            var label = level.uppercased()
            label += String(repeating: " ", count: max(0, 5 - label.count))
            if colors, let color = ansiColor[level] {
                label = "\u{1b}[\(color)m\(label)\u{1b}[0m"
            }
            var line = "\(timestamp(time, utc: false)) \(label) \(message)"
            for (key, value) in metadata {
                line += " \(key)=\(value)"
            }
            return line
        }
    }

    public static func now() -> timespec {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return ts
    }

    private static let ansiColor = ["trace": "2", "debug": "2", "info": "32", "notice": "36", "warning": "33", "error": "31", "critical": "1;31"]

    /// `08:40:36.772` in local time, or `2026-11-23T08:40:36.772Z` in UTC.
    public static func timestamp(_ ts: timespec, utc: Bool) -> String {
        var seconds = ts.tv_sec
        var parts = tm()
        if utc { gmtime_r(&seconds, &parts) } else { localtime_r(&seconds, &parts) }
        let millis = Int(ts.tv_nsec / 1_000_000)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let ms = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        let clock = "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(ms)"
        guard utc else { return clock }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(clock)Z"
    }

    /// A JSON string literal; bytes that are not valid UTF-8 were already replaced by Swift's String.
    public static func jsonString(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
