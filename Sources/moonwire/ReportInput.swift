import Foundation
import MoonwireCore

/// A file `moonwire report` reads, told apart by its content: a run's
/// JSON-lines file (`--metrics-jsonl`) or a summary (`--summary-json`).
enum ReportInput {
    case timeline(MetricsTimeline)
    case summary(MetricsSnapshot)

    /// Anything else is an error naming the file.
    static func read(_ path: String) throws(ReportInputError) -> ReportInput {
        guard var lines = LineReader(path: path) else { throw ReportInputError("cannot read '\(path)'") }
        // A summary is one line of JSON; a JSON-lines file starts with a snapshot.
        let first = lines.next()?.line ?? Data()
        let object = (try? JSONSerialization.jsonObject(with: first)) as? [String: Any]
        guard object?["format"] as? String == MetricsSnapshot.formatName else {
            return .timeline(try MetricsTimeline.read(path))
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw ReportInputError("cannot read '\(path)'") }
        do {
            return .summary(try MetricsSnapshot.decode(data, from: path))
        } catch {
            throw ReportInputError(error.description)
        }
    }
}

/// A file's lines, a chunk at a time: a long run's file is never all in memory.
struct LineReader {
    private let handle: FileHandle
    private var buffer = Data()
    private var position = 0
    private var atEnd = false

    init?(path: String) {
        var directory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &directory), !directory.boolValue,
            let handle = FileHandle(forReadingAtPath: path)
        else { return nil }
        self.handle = handle
    }

    /// The next line without its newline, and whether a newline ended it; nil at the end.
    mutating func next() -> (line: Data, terminated: Bool)? {
        while true {
            if let newline = buffer[position...].firstIndex(of: 0x0A) {
                defer { position = newline + 1 }
                return (buffer[position..<newline], true)
            }
            if atEnd {
                guard position < buffer.count else { return nil }
                defer { position = buffer.count }
                return (buffer[position...], false)
            }
            buffer = buffer.subdata(in: position..<buffer.count)
            position = 0
            let chunk = (try? handle.read(upToCount: 1 << 20)) ?? nil
            if let chunk, !chunk.isEmpty { buffer.append(chunk) } else { atEnd = true }
        }
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
    /// One snapshot: its figures by column (NaN where it has none), so an
    /// hour of lines takes a few MB, not one dictionary a line.
    struct Line {
        var t: Double
        var values: [Double]

        func value(_ column: Int) -> Double? {
            column < values.count && !values[column].isNaN ? values[column] : nil
        }
    }

    var path: String
    var lines: [Line] = []
    /// Every metric (name and tags) any line has, figures or not.
    private(set) var keys: Set<String> = []
    /// The column of each metric's figure (`count`, `interval_p99`, ...).
    private var columns: [String: [String: Int]] = [:]
    private var columnCount = 0
    /// The last line's figures, by metric: the table when there is no summary.
    private(set) var last: [String: [String: Double]] = [:]
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
    /// not a moonwire metrics file. `name` is the file's name in the notes.
    static func read(_ path: String, named name: String? = nil) throws(ReportInputError) -> MetricsTimeline {
        guard var reader = LineReader(path: path) else { throw ReportInputError("cannot read '\(path)'") }
        var timeline = MetricsTimeline(path: name ?? path)
        var number = 0
        while let (row, terminated) = reader.next() {
            number += 1
            if row.isEmpty { continue }
            guard let object = (try? JSONSerialization.jsonObject(with: row)) as? [String: Any],
                let t = object["t"] as? Double, let metrics = object["metrics"] as? [String: Any]
            else {
                // The writer appends whole lines: only the last can be cut short,
                // and only one that starts like a snapshot counts as one.
                if !terminated, row.starts(with: Array(#"{""#.utf8)), number > 1 || Self.looksLikeSnapshot(row) {
                    timeline.cutLine = number
                    break
                }
                throw ReportInputError(
                    number == 1
                        ? "\(path): not a moonwire metrics file (run --metrics-jsonl or --summary-json)"
                        : "\(path): line \(number) is not a moonwire metrics snapshot")
            }
            var line = Line(t: t, values: [])
            var figures: [String: [String: Double]] = [:]
            for (name, entry) in metrics {
                guard let fields = entry as? [String: Any] else { continue }
                timeline.keys.insert(name)
                figures[name] = fields.compactMapValues { ($0 as? NSNumber)?.doubleValue }
                for (field, value) in figures[name]! {
                    let column = timeline.column(name, field)
                    if line.values.count <= column { line.values += Array(repeating: .nan, count: column + 1 - line.values.count) }
                    line.values[column] = value
                }
                if fields["interval_count"] != nil { timeline.hasIntervals = true }
            }
            timeline.lines.append(line)
            timeline.last = figures
            if number == 1 {
                timeline.command = object["command"] as? [String]
                timeline.start = (object["start"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) }
            }
            timeline.shard = object["shard"] as? String ?? timeline.shard
            if object["end"] as? Bool == true {
                timeline.ended = true
                timeline.thresholds = object["thresholds"] as? [String] ?? []
            }
        }
        guard !timeline.lines.isEmpty || timeline.cutLine != nil else {
            throw ReportInputError("\(path): no snapshot in it (a run writes its first after a second)")
        }
        return timeline
    }

    private mutating func column(_ key: String, _ field: String) -> Int {
        if let known = columns[key]?[field] { return known }
        columns[key, default: [:]][field] = columnCount
        columnCount += 1
        return columnCount - 1
    }

    /// The columns of `field` of the metric `name`, every tag set of it.
    func columns(_ name: String, _ field: String) -> [Int] {
        columns.compactMap { key, fields in Self.isMetric(key, name) ? fields[field] : nil }
    }

    /// Whether any line has the metric `name` (any tags).
    func has(_ name: String) -> Bool { keys.contains { Self.isMetric($0, name) } }

    static func isMetric(_ key: String, _ name: String) -> Bool { key == name || key.hasPrefix(name + "{") }

    /// The first keys a snapshot line starts with (its keys are sorted).
    private static func looksLikeSnapshot(_ row: Data) -> Bool {
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
