import Foundation

/// How the report writes a number: every figure with its unit, times in the
/// unit that reads best.
enum ReportUnit: String {
    case seconds = "s"
    case bytes = "B"
    case perSecond = "/s"
    case bytesPerSecond = "B/s"
    case plain = ""

    /// A metric's unit from its name: the built-in times and names that say
    /// they are times (`_seconds`, `_latency`, `_duration`, `_time`, `_rtt`),
    /// byte counts and gauges (`bytes_`, `_bytes`), else a plain number.
    static func of(_ name: String) -> ReportUnit {
        let base = name.split(separator: "{").first.map(String.init) ?? name
        if base.hasPrefix("bytes_") || base.hasSuffix("_bytes") { return .bytes }
        let times = ["_seconds", "_latency", "_duration", "_uncorrected", "_time", "_rtt"]
        if times.contains(where: base.hasSuffix) || base.hasPrefix("connect_") { return .seconds }
        return .plain
    }

    func format(_ v: Double) -> String {
        switch self {
        case .seconds:
            if v == 0 { return "0" }
            if v < 1e-3 { return ReportFormat.digits(v * 1e6) + " µs" }
            if v < 1 { return ReportFormat.digits(v * 1e3) + " ms" }
            return ReportFormat.digits(v) + " s"
        case .bytes, .bytesPerSecond:
            let suffix = self == .bytes ? "" : "/s"
            var value = v
            for unit in ["B", "KiB", "MiB", "GiB"] {
                if value < 1024 || unit == "GiB" {
                    return (unit == "B" ? ReportFormat.grouped(value) : ReportFormat.digits(value)) + " " + unit + suffix
                }
                value /= 1024
            }
            return ""
        case .perSecond:
            return ReportFormat.short(v) + "/s"
        case .plain:
            return ReportFormat.grouped(v)
        }
    }
}

enum ReportFormat {
    /// Three significant digits: 1.23, 12.3, 123, 1234.
    static func digits(_ v: Double) -> String {
        let a = abs(v)
        if a >= 100 || a == 0 { return String(format: "%.0f", v) }
        if a >= 10 { return String(format: "%.1f", v) }
        return String(format: "%.2f", v)
    }

    /// A round number as an axis shows it: 10 ms, 1 s, 2.5k, not 10.0 ms.
    static func tick(_ text: String) -> String {
        text.replacingOccurrences(of: #"(\d)\.0+(?!\d)"#, with: "$1", options: .regularExpression)
            .replacingOccurrences(of: #"(\d\.\d)0(?!\d)"#, with: "$1", options: .regularExpression)
    }

    /// Thousands grouped with a thin space; two decimals for a fraction.
    static func grouped(_ v: Double) -> String {
        guard v == v.rounded(), abs(v) < 1e15 else { return digits(v) }
        let text = String(Int64(v).magnitude)
        var out = ""
        for (i, ch) in text.enumerated() {
            if i > 0, (text.count - i) % 3 == 0 { out += "\u{2009}" }
            out.append(ch)
        }
        return (v < 0 ? "-" : "") + out
    }

    /// 950, 1.2k, 34.5k, 1.20M: axis ticks and rates.
    static func short(_ v: Double) -> String {
        let a = abs(v)
        if a >= 1e6 { return digits(v / 1e6) + "M" }
        if a >= 1e3 { return digits(v / 1e3) + "k" }
        return a >= 1 || a == 0 ? digits(v) : String(format: "%.2g", v)
    }

    /// A time since the start: 12 s, 7:03, 1:02:03.
    static func clock(_ t: Double) -> String {
        if t < 60 { return digits(t) + " s" }
        let s = Int(t.rounded())
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }

    static func html(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for ch in text {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(ch)
            }
        }
        return out
    }

    /// A command line as a shell would take it back.
    static func shell(_ arguments: [String]) -> String {
        arguments.map { arg in
            let safe = !arg.isEmpty && arg.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "-_./:=,@%+".unicodeScalars.contains($0) }
            return safe ? arg : "'" + arg.replacingOccurrences(of: "'", with: "'\\''") + "'"
        }.joined(separator: " ")
    }
}
