import Foundation
import MoonwireCore
import MoonwireLua

/// One file's results (one run of it, with `--repeat`).
struct TestFileReport {
    var file: String
    var results: [TestCaseResult]
    var duration: Double
    /// Which run of the file this is (1-based), when `--repeat` runs it more than once.
    var run: Int? = nil

    /// The file, and the run when there are several: a header and a suite name.
    var title: String { run.map { "\(file) (run \($0))" } ?? file }
}

struct TestSummary {
    var passed = 0
    var failed = 0
    var errors = 0
    var skipped = 0

    init(reports: [TestFileReport]) {
        for result in reports.flatMap(\.results) {
            switch result.status {
            case .passed: passed += 1
            case .failed: failed += 1
            case .error: errors += 1
            case .skipped: skipped += 1
            }
        }
    }

    var total: Int { passed + failed + errors + skipped }

    /// The closing line: "N passed, N failed", plus ", N errors" and ", N skipped" when any.
    var line: String {
        "\(passed) passed, \(failed) failed" + (errors > 0 ? ", \(errors) errors" : "") + (skipped > 0 ? ", \(skipped) skipped" : "")
    }
}

/// `file:line` split in two; the line is nil when there is none.
struct SourceLocation: Equatable {
    var file: String
    var line: Int?

    init(_ text: String) {
        if let colon = text.lastIndex(of: ":"), let line = Int(text[text.index(after: colon)...]) {
            file = String(text[..<colon])
            self.line = line
        } else {
            file = text
            line = nil
        }
    }

    /// Where a failure message (`file:line: message`) points, if it starts with a location.
    static func ofMessage(_ message: String) -> SourceLocation? {
        let first = message.prefix { $0 != "\n" }
        guard let range = first.range(of: #"^[^\s:][^:]*:\d+:"#, options: .regularExpression) else { return nil }
        return SourceLocation(String(first[range].dropLast()))
    }
}

/// The ways results are written: lines for people, TAP 13, JUnit XML, busted's JSON.
enum TestOutput {
    static func lines(_ report: TestFileReport) -> String {
        if report.results.isEmpty { return "" }
        var out = "\(report.title)\n"
        for r in report.results {
            let time = r.status == .skipped ? "" : " (\(milliseconds(r.duration)))"
            out += "  \(label(r.status))  \(r.name)\(time)\n"
            if r.status == .failed || r.status == .error {
                for line in r.message.split(separator: "\n", omittingEmptySubsequences: false) {
                    out += "        \(line)\n"
                }
            }
        }
        return out
    }

    static func label(_ status: TestCaseResult.Status) -> String {
        switch status {
        case .passed: "PASS"
        case .failed: "FAIL"
        case .error: "ERR "
        case .skipped: "SKIP"
        }
    }

    /// `--list`: where each test is declared, and its full name; a file that
    /// does not load says why.
    static func list(_ report: TestFileReport) -> String {
        report.results.map { $0.status == .error ? "\($0.message)\n" : "\($0.location): \($0.name)\n" }.joined()
    }

    static func milliseconds(_ seconds: Double) -> String {
        String(format: "%.1f ms", seconds * 1000)
    }

    static func tap(_ reports: [TestFileReport], summary: TestSummary, seed: UInt32?) -> String {
        var out = "TAP version 13\n"
        if let seed { out += "# seed \(seed)\n" }
        var n = 0
        for report in reports where !report.results.isEmpty {
            out += "# \(report.title)\n"
            for r in report.results {
                n += 1
                let name = r.name.replacingOccurrences(of: "#", with: "\\#")
                switch r.status {
                case .passed: out += "ok \(n) - \(name)\n"
                case .skipped: out += "ok \(n) - \(name) # SKIP pending\n"
                case .failed, .error:
                    let at = SourceLocation.ofMessage(r.message) ?? SourceLocation(r.location)
                    out += "not ok \(n) - \(name)\n  ---\n"
                    // JSON string literals are valid double-quoted YAML scalars.
                    out += "  message: \(LogLine.jsonString(r.message))\n"
                    out += "  severity: \(r.status == .failed ? "fail" : "error")\n"
                    out += "  at:\n    file: \(LogLine.jsonString(at.file))\n"
                    if let line = at.line { out += "    line: \(line)\n" }
                    out += "  duration_ms: \(String(format: "%.3f", r.duration * 1000))\n  ...\n"
                }
            }
        }
        out += "1..\(n)\n# \(summary.line)\n"
        return out
    }

    /// JUnit XML as CI servers read it (the schema: Tests/moonwireTests/Fixtures/junit.xsd).
    /// A failed assertion is a `<failure>`, any other error a `<error>`; `file` and
    /// `line` say where the test is declared.
    static func junit(_ reports: [TestFileReport]) -> String {
        let all = TestSummary(reports: reports)
        let total = reports.reduce(0.0) { $0 + $1.duration }
        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        out += "<testsuites name=\"moonwire\" \(counts(all)) time=\"\(seconds(total))\">\n"
        for report in reports {
            out += "  <testsuite name=\"\(xml(report.title))\" \(counts(TestSummary(reports: [report]))) time=\"\(seconds(report.duration))\">\n"
            for r in report.results {
                let declared = SourceLocation(r.location)
                out += "    <testcase name=\"\(xml(r.name))\" classname=\"\(xml(report.file))\" file=\"\(xml(declared.file))\""
                if let line = declared.line { out += " line=\"\(line)\"" }
                out += " time=\"\(seconds(r.duration))\""
                switch r.status {
                case .passed: out += "/>\n"
                case .skipped: out += ">\n      <skipped/>\n    </testcase>\n"
                case .failed, .error:
                    let element = r.status == .failed ? "failure" : "error"
                    let first = r.message.split(separator: "\n").first.map(String.init) ?? ""
                    let body = r.traceback.isEmpty ? r.message : r.message + "\n" + r.traceback
                    out += ">\n      <\(element) message=\"\(xml(first))\" type=\"\(r.status == .failed ? "assertion" : "error")\">\(xml(body))</\(element)>\n    </testcase>\n"
                }
            }
            out += "  </testsuite>\n"
        }
        return out + "</testsuites>\n"
    }

    /// busted's JSON output (`-o json`): the tests by outcome, each with its
    /// full name, message, where it points (`trace`) and the test itself
    /// (`element`), and the whole run's duration in seconds. A skipped test
    /// (pending, or an `it` without a body) is under `pendings`.
    static func json(_ reports: [TestFileReport]) -> String {
        var buckets: [String: [String]] = ["successes": [], "failures": [], "errors": [], "pendings": []]
        for report in reports {
            for r in report.results {
                let declared = SourceLocation(r.location)
                let at = r.status == .passed ? declared : SourceLocation.ofMessage(r.message) ?? declared
                func trace(_ at: SourceLocation) -> String {
                    "{\"short_src\":\(LogLine.jsonString(at.file)),\"currentline\":\(at.line ?? 0),"
                        + "\"traceback\":\(LogLine.jsonString(r.traceback)),\"message\":\(LogLine.jsonString(r.title))}"
                }
                let element = "{\"name\":\(LogLine.jsonString(r.title)),\"descriptor\":\"\(r.status == .skipped ? "pending" : "it")\","
                    + "\"duration\":\(r.duration),\"attributes\":[],\"trace\":\(trace(declared))}"
                var entry = "{\"name\":\(LogLine.jsonString(r.name)),"
                if r.status != .passed { entry += "\"message\":\(LogLine.jsonString(r.message)),"}
                if r.status == .error { entry += "\"isError\":true," }
                entry += "\"trace\":\(trace(at)),\"element\":\(element)}"
                let key = switch r.status {
                case .passed: "successes"
                case .failed: "failures"
                case .error: "errors"
                case .skipped: "pendings"
                }
                buckets[key, default: []].append(entry)
            }
        }
        let duration = reports.reduce(0.0) { $0 + $1.duration }
        let lists = ["successes", "failures", "errors", "pendings"].map { "\"\($0)\":[\(buckets[$0, default: []].joined(separator: ","))]" }
        return "{" + lists.joined(separator: ",") + ",\"duration\":\(duration)}"
    }

    /// busted's gtest output handler, line for line: a header, a block per file as
    /// it ends, a summary listing what did not pass. `colors` (at a terminal) as
    /// busted draws them; `verbose` adds each failure's traceback.
    struct GTest {
        var colors: Bool
        var verbose: Bool

        private func paint(_ code: Int, _ text: String) -> String { colors ? "\u{1b}[\(code)m\(text)\u{1b}[0m" : text }
        private func green(_ s: String) -> String { paint(32, s) }
        private func yellow(_ s: String) -> String { paint(33, s) }
        private func red(_ s: String) -> String { paint(31, s) }
        private func magenta(_ s: String) -> String { paint(35, s) }

        /// `spec/a_spec.lua @ 4: outer inner fails`: where the test is declared, and its full name.
        private func fullName(_ r: TestCaseResult) -> String {
            let at = SourceLocation(r.location)
            return paint(36, at.file) + " @ " + paint(36, String(at.line ?? 0)) + ": " + paint(1, r.name)
        }

        private static func ms(_ seconds: Double) -> String { String(format: "%.2f", seconds * 1000) }
        private static func plural(_ n: Int, _ one: String, _ many: String) -> String { n == 1 ? one : many }

        func header(seed: UInt32?) -> String {
            (seed.map { yellow("Note: Randomizing test order with a seed of \($0).\n") } ?? "")
                + green("[==========]") + " Running tests from scanned files.\n"
                + green("[----------]") + " Global test environment setup.\n"
        }

        func file(_ report: TestFileReport) -> String {
            var out = green("[----------]") + " Running tests from \(report.title)\n"
            for r in report.results {
                out += green("[ RUN      ]") + " \(fullName(r))\n"
                if r.status == .failed || r.status == .error {
                    out += r.message + "\n"
                    // Set off by blank lines, as busted prints its tracebacks.
                    if verbose, !r.traceback.isEmpty { out += "\n" + r.traceback + "\n\n" }
                }
                let label = switch r.status {
                case .passed: green("[       OK ]")
                case .skipped: yellow("[ SKIPPED  ]")
                case .failed: red("[  FAILED  ]")
                case .error: magenta("[  ERROR   ]")
                }
                out += "\(label) \(fullName(r)) (\(Self.ms(r.duration)) ms)\n"
            }
            let n = report.results.count
            return out + green("[----------]") + " \(n) \(Self.plural(n, "test", "tests")) from \(report.title) (\(Self.ms(report.duration)) ms total)\n\n"
        }

        func summary(_ reports: [TestFileReport], duration: Double) -> String {
            let all = reports.flatMap(\.results)
            let s = TestSummary(reports: reports)
            var out = green("[----------]") + " Global test environment teardown.\n"
            out += green("[==========]") + " \(all.count) \(Self.plural(all.count, "test", "tests")) from \(reports.count) test "
                + "\(Self.plural(reports.count, "file", "files")) ran. (\(Self.ms(duration)) ms total)\n"
            out += green("[  PASSED  ]") + " \(s.passed) \(Self.plural(s.passed, "test", "tests")).\n"
            let lists: [(TestCaseResult.Status, Int, (String) -> String, String, String)] = [
                (.skipped, s.skipped, yellow, "[ SKIPPED  ]", "SKIPPED "), (.failed, s.failed, red, "[  FAILED  ]", "FAILED "),
                (.error, s.errors, magenta, "[  ERROR   ]", ""),
            ]
            for (status, count, color, label, _) in lists where count > 0 {
                let noun = status == .error ? Self.plural(count, "error", "errors") : Self.plural(count, "test", "tests")
                out += color(label) + " \(count) \(noun), listed below:\n"
                for r in all where r.status == status { out += color(label) + " \(fullName(r))\n" }
            }
            if s.skipped + s.failed + s.errors > 0 { out += "\n" }
            for (status, count, _, _, word) in lists where count > 0 {
                let noun = status == .error ? Self.plural(count, "ERROR", "ERRORS") : Self.plural(count, "TEST", "TESTS")
                out += " \(count) \(word)\(noun)\n"
            }
            return out
        }
    }

    private static func counts(_ s: TestSummary) -> String {
        "tests=\"\(s.total)\" failures=\"\(s.failed)\" errors=\"\(s.errors)\" skipped=\"\(s.skipped)\""
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
