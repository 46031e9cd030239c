import Foundation
import MoonwireCore

/// A file `moonwire report` reads, told apart by its content: a run's
/// JSON-lines file (`--metrics-jsonl`) or a summary (`--summary-json`).
enum ReportInput {
    case timeline(MetricsTimeline)
    case summary(MetricsSnapshot)

    /// Anything else is an error naming the file.
    static func read(_ path: String) throws(ReportInputError) -> ReportInput {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ReportInputError("cannot read '\(path)'")
        }
        let firstLine = data.prefix { $0 != 0x0A }
        let object = (try? JSONSerialization.jsonObject(with: firstLine)) as? [String: Any]
        if object?["format"] as? String == MetricsSnapshot.formatName {
            do {
                return .summary(try MetricsSnapshot.decode(data, from: path))
            } catch {
                throw ReportInputError(error.description)
            }
        }
        return .timeline(try MetricsTimeline.parse(data, path: path))
    }
}

struct ReportInputError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A run's `--metrics-jsonl` file: one snapshot a line, each metric's count
/// (or value) since the start and, for histograms, the percentiles since the
/// start and of the values since the line before (`interval_p99`, ...).
struct MetricsTimeline {
    struct Line {
        var t: Double
        var metrics: [String: [String: Double]]
    }

    var path: String
    var lines: [Line] = []
    /// The command line of the run (first line), when the file has it.
    var command: [String]?
    /// The wall-clock time of t = 0 (first line).
    var start: Date?
    var shard: String?
    /// The thresholds the run checked (its last line), as expressions.
    var thresholds: [String] = []
    /// Whether the run wrote its last line (a killed run did not).
    var ended = false
    /// The line that was cut short at the end of the file (a killed run).
    var cutLine: Int?
    /// Whether histograms have per-line figures (`interval_p99`): files of
    /// moonwire before the report only have the percentiles since the start.
    var hasIntervals = false

    var duration: Double { lines.last?.t ?? 0 }

    /// Every full line; a last line cut short is noted, not an error. A file
    /// whose first line is not a snapshot, or a bad line before the last, is
    /// not a moonwire metrics file.
    static func parse(_ data: Data, path: String) throws(ReportInputError) -> MetricsTimeline {
        var timeline = MetricsTimeline(path: path)
        let rows = data.split(separator: 0x0A, omittingEmptySubsequences: false)
        let complete = data.last == 0x0A ? rows.count - 1 : rows.count
        for (index, row) in rows.enumerated() where !row.isEmpty {
            let number = index + 1
            guard let object = (try? JSONSerialization.jsonObject(with: row)) as? [String: Any],
                let t = object["t"] as? Double, let metrics = object["metrics"] as? [String: Any]
            else {
                // The writer appends whole lines: only the last can be cut short,
                // and only one that starts like a snapshot counts as one.
                if index == complete - 1, data.last != 0x0A, row.starts(with: Array(#"{""#.utf8)), index > 0 || Self.looksLikeSnapshot(row) {
                    timeline.cutLine = number
                    break
                }
                throw ReportInputError(
                    index == 0
                        ? "\(path): not a moonwire metrics file (run --metrics-jsonl or --summary-json)"
                        : "\(path): line \(number) is not a moonwire metrics snapshot")
            }
            var values: [String: [String: Double]] = [:]
            for (name, entry) in metrics {
                guard let fields = entry as? [String: Any] else { continue }
                values[name] = fields.compactMapValues { ($0 as? NSNumber)?.doubleValue }
                if fields["interval_count"] != nil { timeline.hasIntervals = true }
            }
            timeline.lines.append(Line(t: t, metrics: values))
            if index == 0 {
                timeline.command = object["command"] as? [String]
                timeline.start = (object["start"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) }
            }
            timeline.shard = object["shard"] as? String ?? timeline.shard
            if object["end"] as? Bool == true {
                timeline.ended = true
                timeline.thresholds = object["thresholds"] as? [String] ?? []
            }
        }
        return timeline
    }

    /// The first keys a snapshot line starts with (its keys are sorted).
    private static func looksLikeSnapshot(_ row: Data.SubSequence) -> Bool {
        [#"{"command":"#, #"{"metrics":"#].contains { row.starts(with: Array($0.utf8)) }
    }

    /// What the report says about how the file ended.
    var note: String? {
        if let cutLine {
            return "\(path): line \(cutLine) is cut short (the run was killed?): the report goes up to t = \(ReportFormat.clock(duration)), its last full line."
        }
        // Files from before the end-of-run line have no command line either.
        if !ended, command != nil {
            return "\(path) has no end-of-run line (the run was killed?): the report goes up to t = \(ReportFormat.clock(duration)), its last line."
        }
        return nil
    }
}
