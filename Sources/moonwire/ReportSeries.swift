import Foundation

/// One or more runs' JSON-lines files (shards) on one time axis, read per
/// metric as series over time. With one file the times are its lines'; with
/// several, whole seconds from the earliest start, each file shifted by its
/// wall-clock start. A metric's parts (its tag sets and the shards) add up for
/// counters and gauges; for percentiles the highest part counts (an upper
/// bound: percentiles do not add).
struct ReportSeries {
    let times: [Double]
    private let files: [File]

    private struct File {
        let times: [Double]
        let lines: [MetricsTimeline.Line]
        let hasIntervals: Bool

        /// The line whose interval holds `time`: the first at or after it.
        func covering(_ time: Double) -> Int? {
            var low = 0
            var high = times.count
            while low < high {
                let mid = (low + high) / 2
                if times[mid] < time - 1e-9 { low = mid + 1 } else { high = mid }
            }
            return low < times.count ? low : nil
        }

        /// The entries of `name` in a line: the metric and each of its tag sets.
        func entries(_ line: Int, _ name: String) -> [[String: Double]] {
            lines[line].metrics.compactMap { key, value in key == name || key.hasPrefix(name + "{") ? value : nil }
        }

        /// `field` of `name` added over its tag sets, nil when no entry has it.
        func sum(_ line: Int, _ name: String, _ field: String) -> Double? {
            let values = entries(line, name).compactMap { $0[field] }
            return values.isEmpty ? nil : values.reduce(0, +)
        }

        /// A counter's total at `time`: linear between the lines around it
        /// (from 0 at the file's start), the last total after its end.
        func total(_ name: String, at time: Double, origin: Double) -> Double? {
            let valued = { (i: Int) in sum(i, name, "count").map { (times[i], $0) } }
            guard let j = covering(time) else { return (0..<times.count).reversed().lazy.compactMap(valued).first?.1 }
            guard let after = (j..<times.count).lazy.compactMap(valued).first else { return nil }
            let before = (0..<j).reversed().lazy.compactMap(valued).first ?? (origin, 0)
            guard after.0 > before.0 else { return after.1 }
            return before.1 + (after.1 - before.1) * (time - before.0) / (after.0 - before.0)
        }
    }

    /// Each file's times are shifted by its start's seconds after the earliest start.
    init(_ timelines: [MetricsTimeline]) {
        let earliest = timelines.compactMap(\.start).min()
        let offsets = timelines.map { t in t.start.flatMap { s in earliest.map { s.timeIntervalSince($0) } } ?? 0 }
        files = zip(timelines, offsets).map { timeline, offset in
            File(times: timeline.lines.map { $0.t + offset }, lines: timeline.lines, hasIntervals: timeline.hasIntervals)
        }
        origins = offsets
        if files.count == 1 {
            // The end-of-run line a moment after the last tick would make a rate of a few messages.
            var own = files[0].times
            if own.count > 2, own[own.count - 1] - own[own.count - 2] < 0.5 { own.removeLast() }
            times = own
        } else {
            let end = files.compactMap(\.times.last).max() ?? 0
            var grid = stride(from: 1.0, through: end, by: 1).map { $0 }
            if end - (grid.last ?? 0) > 1e-6 { grid.append(end) }
            times = grid
        }
    }

    private let origins: [Double]

    /// Whether any line of any file has the metric (any tags).
    func has(_ name: String) -> Bool {
        files.contains { file in file.lines.indices.contains { !file.entries($0, name).isEmpty } }
    }

    /// A counter per second between one time and the one before (from 0).
    func rate(_ name: String) -> [Double?] {
        let totals = times.map { time in
            let parts = files.indices.compactMap { files[$0].total(name, at: time, origin: origins[$0]) }
            return parts.isEmpty ? nil : parts.reduce(0, +)
        }
        var previous: (time: Double, total: Double) = (0, 0)
        return zip(times, totals).map { time, total in
            guard let total else { return nil }
            defer { previous = (time, total) }
            return time > previous.time ? max(0, total - previous.total) / (time - previous.time) : nil
        }
    }

    /// A gauge's value at each time (the line covering it), added over files.
    func gauge(_ name: String) -> [Double?] {
        combine { file, line in file.sum(line, name, "count") } reduce: { $0.reduce(0, +) }
    }

    /// A histogram's figure (p50, p90, p99, max) of the values recorded in the
    /// interval of each time; the highest of the parts. Files without
    /// per-interval figures give the figure since the start.
    func percentile(_ name: String, _ field: String) -> [Double?] {
        combine { file, line in
            let key = file.hasIntervals ? "interval_" + field : field
            return file.entries(line, name).compactMap { $0[key] }.max()
        } reduce: { $0.max() ?? 0 }
    }

    /// How many values a histogram recorded in each interval.
    func intervalCount(_ name: String) -> [Double?] {
        combine { file, line in file.sum(line, name, file.hasIntervals ? "interval_count" : "count") } reduce: { $0.reduce(0, +) }
    }

    /// Whether every file has per-interval histogram figures.
    var hasIntervals: Bool { files.allSatisfy(\.hasIntervals) }

    private func combine(_ value: (File, Int) -> Double?, reduce: ([Double]) -> Double) -> [Double?] {
        times.map { time in
            let parts = files.compactMap { file in file.covering(time).flatMap { value(file, $0) } }
            return parts.isEmpty ? nil : reduce(parts)
        }
    }
}
