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
        let timeline: MetricsTimeline
        /// The lines' times on the common axis.
        let times: [Double]
        /// Where the file's t = 0 is on the common axis.
        let origin: Double

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

        /// The figures in `columns` of a line, nil when it has none of them.
        func values(_ line: Int, _ columns: [Int]) -> [Double]? {
            let found = columns.compactMap { timeline.lines[line].value($0) }
            return found.isEmpty ? nil : found
        }

        /// A counter's total at `time`: linear between the lines around it
        /// (from 0 at the file's start), the last total after its end.
        func total(_ columns: [Int], at time: Double) -> Double? {
            let valued = { (i: Int) in values(i, columns).map { (times[i], $0.reduce(0, +)) } }
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
        files = timelines.map { timeline in
            let offset = timeline.start.flatMap { s in earliest.map { s.timeIntervalSince($0) } } ?? 0
            return File(timeline: timeline, times: timeline.lines.map { $0.t + offset }, origin: offset)
        }
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

    /// Whether any line of any file has the metric (any tags).
    func has(_ name: String) -> Bool { files.contains { $0.timeline.has(name) } }

    /// A counter per second between one time and the one before (from 0).
    func rate(_ name: String) -> [Double?] {
        let columns = files.map { $0.timeline.columns(name, "count") }
        let totals = times.map { time in
            let parts = files.indices.compactMap { files[$0].total(columns[$0], at: time) }
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
        combine(name) { _ in "count" } reduce: { $0.reduce(0, +) }
    }

    /// A histogram's figure (p50, p90, p99, max) of the values recorded in the
    /// interval of each time; the highest of the parts. Files without
    /// per-interval figures give the figure since the start.
    func percentile(_ name: String, _ field: String) -> [Double?] {
        combine(name) { $0.hasIntervals ? "interval_" + field : field } reduce: { $0.max() ?? 0 }
    }

    /// How many values a histogram recorded in each interval.
    func intervalCount(_ name: String) -> [Double?] {
        combine(name) { $0.hasIntervals ? "interval_count" : "count" } reduce: { $0.reduce(0, +) }
    }

    /// Whether every file has per-interval histogram figures.
    var hasIntervals: Bool { files.allSatisfy(\.timeline.hasIntervals) }

    private func combine(_ name: String, field: (MetricsTimeline) -> String, reduce: ([Double]) -> Double) -> [Double?] {
        let columns = files.map { $0.timeline.columns(name, field($0.timeline)) }
        return times.map { time in
            let parts = files.indices.compactMap { i in files[i].covering(time).flatMap { files[i].values($0, columns[i]) } }
            return parts.isEmpty ? nil : reduce(parts.flatMap { $0 })
        }
    }
}
