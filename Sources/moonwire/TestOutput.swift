import Foundation
import MoonwireCore
import MoonwireLua

/// One file's results.
struct TestFileReport {
    var file: String
    var results: [TestCaseResult]
    var duration: Double
}

struct TestSummary {
    var passed = 0
    var failed = 0
    var skipped = 0

    init(reports: [TestFileReport]) {
        for result in reports.flatMap(\.results) {
            switch result.status {
            case .passed: passed += 1
            case .failed: failed += 1
            case .skipped: skipped += 1
            }
        }
    }

    /// The closing line: "N passed, N failed", plus ", N skipped" when any.
    var line: String {
        "\(passed) passed, \(failed) failed" + (skipped > 0 ? ", \(skipped) skipped" : "")
    }
}

/// The three ways results are written: lines for people, TAP 13, JUnit XML.
enum TestOutput {
    static func lines(_ report: TestFileReport) -> String {
        if report.results.isEmpty { return "" }
        var out = "\(report.file)\n"
        for r in report.results {
            let label = ["passed": "PASS", "failed": "FAIL", "skipped": "SKIP"][r.status.rawValue] ?? "????"
            let time = r.status == .skipped ? "" : " (\(milliseconds(r.duration)))"
            out += "  \(label)  \(r.name)\(time)\n"
            if r.status == .failed {
                for line in r.message.split(separator: "\n", omittingEmptySubsequences: false) {
                    out += "        \(line)\n"
                }
            }
        }
        return out
    }

    static func milliseconds(_ seconds: Double) -> String {
        String(format: "%.1f ms", seconds * 1000)
    }

    static func tap(_ reports: [TestFileReport], summary: TestSummary) -> String {
        var out = "TAP version 13\n"
        var n = 0
        for report in reports where !report.results.isEmpty {
            out += "# \(report.file)\n"
            for r in report.results {
                n += 1
                let name = r.name.replacingOccurrences(of: "#", with: "\\#")
                switch r.status {
                case .passed: out += "ok \(n) - \(name)\n"
                case .skipped: out += "ok \(n) - \(name) # SKIP pending\n"
                case .failed:
                    out += "not ok \(n) - \(name)\n  ---\n"
                    // JSON string literals are valid double-quoted YAML scalars.
                    out += "  message: \(LogLine.jsonString(r.message))\n"
                    out += "  at: \(LogLine.jsonString(r.location))\n"
                    out += "  duration_ms: \(String(format: "%.3f", r.duration * 1000))\n  ...\n"
                }
            }
        }
        out += "1..\(n)\n# \(summary.line)\n"
        return out
    }

    static func junit(_ reports: [TestFileReport]) -> String {
        let all = TestSummary(reports: reports)
        let total = reports.reduce(0.0) { $0 + $1.duration }
        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        out += "<testsuites name=\"moonwire\" tests=\"\(all.passed + all.failed + all.skipped)\" failures=\"\(all.failed)\" errors=\"0\" skipped=\"\(all.skipped)\" time=\"\(seconds(total))\">\n"
        for report in reports {
            let s = TestSummary(reports: [report])
            out += "  <testsuite name=\"\(xml(report.file))\" tests=\"\(report.results.count)\" failures=\"\(s.failed)\" errors=\"0\" skipped=\"\(s.skipped)\" time=\"\(seconds(report.duration))\">\n"
            for r in report.results {
                out += "    <testcase name=\"\(xml(r.name))\" classname=\"\(xml(report.file))\" file=\"\(xml(r.location))\" time=\"\(seconds(r.duration))\""
                switch r.status {
                case .passed: out += "/>\n"
                case .skipped: out += ">\n      <skipped/>\n    </testcase>\n"
                case .failed:
                    let first = r.message.split(separator: "\n").first.map(String.init) ?? ""
                    let body = r.traceback.isEmpty ? r.message : r.message + "\n" + r.traceback
                    out += ">\n      <failure message=\"\(xml(first))\" type=\"failure\">\(xml(body))</failure>\n    </testcase>\n"
                }
            }
            out += "  </testsuite>\n"
        }
        return out + "</testsuites>\n"
    }

    private static func seconds(_ s: Double) -> String { String(format: "%.6f", s) }

    /// Escaped for XML text and attributes; characters XML 1.0 cannot hold become U+FFFD.
    static func xml(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "\n": out += "&#10;"
            case "\t", "\r": out.unicodeScalars.append(scalar)
            case _ where scalar.value < 0x20 || scalar.value == 0xFFFE || scalar.value == 0xFFFF: out += "\u{FFFD}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
