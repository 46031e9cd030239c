import Foundation
import Histogram

/// A histogram as the summary file holds it: its precision and the count of
/// every bucket that has any, as `[value, count]` pairs. Decoding records each
/// pair back into a histogram of the same precision, so the buckets, and with
/// them every percentile, come back exactly; adding decoded histograms is
/// HdrHistogram's own exact merge.
public struct EncodedHistogram: Codable, Equatable, Sendable {
    public var digits: Int
    public var counts: [[UInt64]]

    init(_ histogram: Histogram<UInt64>) {
        digits = Int(histogram.numberOfSignificantValueDigits.rawValue)
        counts = histogram.recordedValues().map { [$0.value, $0.count] }
    }

    /// Sized for the highest value at once: an auto-resizing histogram grows one
    /// bucket at a time, and each growth appends through unspecialized generic code
    /// (about 16 M instructions per decode of a latency histogram, every scrape).
    public func decode() -> Histogram<UInt64> {
        let precision = SignificantDigits(rawValue: Int8(digits)) ?? .three
        let highest = counts.reduce(UInt64(2)) { $1.count == 2 ? Swift.max($0, $1[0]) : $0 }
        var h = Histogram<UInt64>(highestTrackableValue: highest, numberOfSignificantValueDigits: precision)
        h.autoResize = true
        for pair in counts where pair.count == 2 { _ = h.record(pair[0], count: pair[1]) }
        return h
    }
}

/// Everything one run (or several merged) recorded: what `--summary-json`
/// writes and `moonwire metrics merge` reads.
public struct MetricsSnapshot: Codable, Sendable {
    public struct Metric: Codable, Sendable {
        public var name: String
        public var tags: [String: String]
        public var kind: MetricsRegistry.Kind
        /// Counter total or gauge value.
        public var value: Double?
        /// Gauge: the highest value it had.
        public var max: Double?
        public var histogram: EncodedHistogram?
        /// What the figures are in: `s` for histograms (times), `bytes` for counters and
        /// gauges named `bytes_*` or `*_bytes` (as `moonwire report` reads them), `1` for the rest. Written by ``encoded()``; a file's own is not read back.
        public var unit: String?
        /// The figures the table prints, for a reader without an HDR decoder (`jq`).
        /// Written by ``encoded()`` from `value`, `max` and `histogram`, which stay the
        /// data: merging reads those and computes the figures again.
        public var values: Figures?

        public var key: MetricKey { MetricKey(name: name, tags: tags) }

        public init(name: String, tags: [String: String], kind: MetricsRegistry.Kind, value: Double?, max: Double?, histogram: EncodedHistogram?) {
            self.name = name
            self.tags = tags
            self.kind = kind
            self.value = value
            self.max = max
            self.histogram = histogram
        }

        /// `s`, `bytes` or `1` (see ``unit``).
        var derivedUnit: String {
            switch kind {
            case .histogram: "s"
            case _ where name.hasPrefix("bytes_") || name.hasSuffix("_bytes"): "bytes"
            default: "1"
            }
        }
    }

    /// One metric's figures, in its unit: counters `count` and `rate` (per second);
    /// gauges `value` and `max`; histograms `count`, `rate`, `min`, `mean`, `p50`,
    /// `p90`, `p95`, `p99`, `p99.9` and `max` (the figures absent while it is empty).
    public struct Figures: Codable, Equatable, Sendable {
        public var count: Double?
        public var rate: Double?
        public var value: Double?
        public var min: Double?
        public var mean: Double?
        public var p50: Double?
        public var p90: Double?
        public var p95: Double?
        public var p99: Double?
        public var p999: Double?
        public var max: Double?

        enum CodingKeys: String, CodingKey {
            case count, rate, value, min, mean, p50, p90, p95, p99, max
            case p999 = "p99.9"
        }

        init(_ s: MetricStatistics) {
            switch s.kind {
            case .counter:
                count = s.count
                rate = s.rate
            case .gauge:
                value = s.value
                max = s.max
            case .histogram:
                count = s.count
                rate = s.rate
                min = s.min
                mean = s.mean
                (p50, p90, p95, p99, p999) = (s.percentile(50), s.percentile(90), s.percentile(95), s.percentile(99), s.percentile(99.9))
                max = s.max
            }
        }
    }

    public static let formatName = "moonwire-metrics"
    public var format = MetricsSnapshot.formatName
    public var version = 1
    /// Seconds the run took (merged: the longest).
    public var duration: Double
    /// The shards this holds (empty for a run not split).
    public var shards: [Shard]
    /// When each run's load began (its first `mw.rate` or `mw.vus` start), as its own
    /// clock read it: one for a run, one a shard merged. Absent in older files.
    public var starts: [Start]?
    /// Written by ``encoded()`` when there are two starts or more: the latest minus the
    /// earliest, in seconds, how far apart the shards actually began.
    public var startSpread: Double?
    /// The thresholds of the run (`--threshold` and the script's `mw.thresholds`), as
    /// expressions: a shard leaves them to the merge, which checks them on the whole.
    public var thresholds: [String]?
    public var metrics: [Metric]

    /// A run's load began `at` (seconds since 1970, UTC; `time` is the same in RFC 3339).
    public struct Start: Codable, Equatable, Sendable {
        public var shard: Shard?
        public var at: Double
        public var time: String?

        public init(shard: Shard?, at: Double) {
            self.shard = shard
            self.at = at
        }
    }

    public init(duration: Double, shards: [Shard], starts: [Start] = [], thresholds: [String] = [], metrics: [Metric]) {
        self.duration = duration
        self.shards = shards
        self.starts = starts.isEmpty ? nil : starts
        self.thresholds = thresholds.isEmpty ? nil : thresholds
        self.metrics = metrics
    }

    /// The latest start minus the earliest: nil below two starts.
    public var spreadOfStarts: Double? {
        guard let starts, starts.count >= 2 else { return nil }
        let times = starts.map(\.at)
        return times.max()! - times.min()!
    }

    public enum MergeError: Error, CustomStringConvertible {
        case kindConflict(String)
        case notASummary(String)
        case shards(String)

        public var description: String {
            switch self {
            case .kindConflict(let name): "metric '\(name)' is a different kind in different files"
            case .notASummary(let why), .shards(let why): why
            }
        }
    }

    /// Where a shard's summary goes when `--summary-json` names a directory:
    /// `shard-I-of-N.json`, or `summary.json` for a run not split.
    public static func fileName(shard: Shard?) -> String {
        shard.map { "shard-\($0.index)-of-\($0.count).json" } ?? "summary.json"
    }

    /// Whether `name` is one of ``fileName(shard:)``'s shard files.
    public static func isShardFileName(_ name: String) -> Bool {
        let parts = name.split(separator: "-")
        return parts.count == 4 && parts[0] == "shard" && Int(parts[1]) != nil && parts[2] == "of" && parts[3].hasSuffix(".json")
            && Int(parts[3].dropLast(5)) != nil
    }

    /// The parts of one run, each shard once and none missing: what a merge of
    /// a directory of shard files checks before it adds them up.
    public static func checkWhole(_ parts: [MetricsSnapshot], in place: String) throws(MergeError) {
        let shards = parts.flatMap(\.shards)
        guard let count = shards.first?.count else { throw .shards("\(place): no shard files (shard-I-of-N.json, from run --summary-json DIR)") }
        if let other = shards.first(where: { $0.count != count }) {
            throw .shards("\(place): shards of \(count) and of \(other.count) together: one run's shards only")
        }
        var seen = Set<Int>()
        for s in shards where !seen.insert(s.index).inserted {
            throw .shards("\(place): shard \(s) twice")
        }
        let missing = (1...count).filter { !seen.contains($0) }
        if !missing.isEmpty {
            throw .shards("\(place): shard\(missing.count > 1 ? "s" : "") \(missing.map { "\($0)/\(count)" }.joined(separator: ", ")) missing (\(shards.count) of \(count) files)")
        }
    }

    /// Several runs as one: counters add, gauges add (their highs too, an upper
    /// bound), histograms merge bucket by bucket (exact), the duration is the
    /// longest. Metrics are matched by name and tags.
    public static func merge(_ parts: [MetricsSnapshot]) throws(MergeError) -> MetricsSnapshot {
        var order: [MetricKey] = []
        var merged: [MetricKey: Metric] = [:]
        var histograms: [MetricKey: Histogram<UInt64>] = [:]
        for part in parts {
            for m in part.metrics {
                let key = m.key
                guard var existing = merged[key] else {
                    order.append(key)
                    merged[key] = m
                    if let h = m.histogram { histograms[key] = h.decode() }
                    continue
                }
                guard existing.kind == m.kind else { throw .kindConflict(key.display) }
                switch m.kind {
                case .counter:
                    existing.value = (existing.value ?? 0) + (m.value ?? 0)
                case .gauge:
                    existing.value = (existing.value ?? 0) + (m.value ?? 0)
                    existing.max = (existing.max ?? 0) + (m.max ?? 0)
                case .histogram:
                    if let h = m.histogram { histograms[key, default: MetricsRegistry.makeHistogram()].add(h.decode()) }
                }
                merged[key] = existing
            }
        }
        for (key, h) in histograms { merged[key]?.histogram = EncodedHistogram(h) }
        return MetricsSnapshot(
            duration: parts.map(\.duration).max() ?? 0,
            shards: parts.flatMap(\.shards).sorted { $0.index < $1.index },
            starts: parts.flatMap { $0.starts ?? [] }.sorted { ($0.shard?.index ?? 0, $0.at) < ($1.shard?.index ?? 0, $1.at) },
            thresholds: parts.flatMap { $0.thresholds ?? [] }.reduce(into: []) { all, t in if !all.contains(t) { all.append(t) } },
            metrics: order.compactMap { merged[$0] }
        )
    }

    /// The file: each metric with its unit and figures computed now, beside its data.
    public func encoded() -> Data {
        var out = self
        out.startSpread = spreadOfStarts
        out.starts = starts?.map { start in
            var start = start
            start.time = StartAt.format(start.at)
            return start
        }
        for i in out.metrics.indices {
            out.metrics[i].unit = out.metrics[i].derivedUnit
            out.metrics[i].values = Figures(MetricStatistics(out.metrics[i], duration: duration))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(out)) ?? Data()
    }

    public static func decode(_ data: Data, from path: String) throws(MergeError) -> MetricsSnapshot {
        let snapshot: MetricsSnapshot
        do {
            snapshot = try JSONDecoder().decode(MetricsSnapshot.self, from: data)
        } catch {
            throw .notASummary("\(path): not a moonwire summary file (--summary-json): \(error)")
        }
        guard snapshot.format == formatName else { throw .notASummary("\(path): not a moonwire summary file (--summary-json)") }
        return snapshot
    }
}

/// One row of the summary: the statistics of one metric.
public struct MetricStatistics: Sendable {
    public let key: MetricKey
    public let kind: MetricsRegistry.Kind
    public let count: Double
    public let rate: Double
    public let value: Double?
    public let min: Double?
    public let max: Double?
    private let histogram: Histogram<UInt64>?

    /// The mean walks every bucket, so it is worked out when asked for, not for
    /// every scrape's quantiles.
    public var mean: Double? {
        guard kind == .histogram, let h = histogram, h.totalCount > 0 else { return nil }
        return h.mean / MetricsRegistry.histogramScale
    }

    public init(_ metric: MetricsSnapshot.Metric, duration: Double) {
        self.init(metric, decoded: metric.histogram?.decode(), duration: duration)
    }

    /// With the metric's histogram already decoded (`metric.histogram?.decode()`).
    public init(_ metric: MetricsSnapshot.Metric, decoded h: Histogram<UInt64>?, duration: Double) {
        key = metric.key
        kind = metric.kind
        histogram = h
        let per = duration > 0 ? duration : 1
        switch metric.kind {
        case .counter:
            count = metric.value ?? 0
            value = metric.value
            min = nil
            max = nil
        case .gauge:
            count = metric.value ?? 0
            value = metric.value
            min = nil
            max = metric.max
        case .histogram:
            let scale = MetricsRegistry.histogramScale
            let n = Double(h?.totalCount ?? 0)
            count = n
            value = nil
            min = n > 0 ? Double(h!.min) / scale : nil
            max = n > 0 ? Double(h!.max) / scale : nil
        }
        rate = count / per
    }

    /// The value at `percentile` (0 to 100), histograms only.
    public func percentile(_ p: Double) -> Double? {
        guard let h = histogram, h.totalCount > 0 else { return nil }
        return Double(h.valueAtPercentile(p)) / MetricsRegistry.histogramScale
    }

    /// A statistic by its name in a threshold: count, rate, value, min, max,
    /// avg (mean), pNN (p50, p99, p99.9, ...).
    public func statistic(_ name: String) -> Double? {
        switch name {
        case "count": return count
        case "rate": return rate
        case "value": return value ?? count
        case "min": return min
        case "max": return max
        case "avg", "mean": return mean
        default:
            guard name.hasPrefix("p"), let p = Double(name.dropFirst()), (0...100).contains(p) else { return nil }
            return percentile(p)
        }
    }

    public static let statisticNames = "count, rate, value, min, max, avg, p50, p90, p95, p99, p99.9 (any pNN)"

    public static func isStatisticName(_ name: String) -> Bool {
        switch name {
        case "count", "rate", "value", "min", "max", "avg", "mean": return true
        default:
            guard name.hasPrefix("p"), let p = Double(name.dropFirst()) else { return false }
            return (0...100).contains(p)
        }
    }
}

extension MetricsSnapshot {
    public func statistics() -> [MetricStatistics] {
        metrics.sorted { $0.key < $1.key }.map { MetricStatistics($0, duration: duration) }
    }

    /// The end-of-run table: count, rate, min, p50, p90, p99, p99.9, max per
    /// metric; times in the unit that reads best (us, ms, s).
    public func table() -> String {
        let header = ["metric", "count", "rate/s", "min", "p50", "p90", "p99", "p99.9", "max"]
        var rows: [[String]] = []
        for s in statistics() {
            switch s.kind {
            case .counter:
                rows.append([s.key.display, Self.number(s.count), Self.number(s.rate), "", "", "", "", "", ""])
            case .gauge:
                rows.append([s.key.display, Self.number(s.count), "", "", "", "", "", "", s.max.map(Self.number) ?? ""])
            case .histogram:
                let cells = [s.min, s.percentile(50), s.percentile(90), s.percentile(99), s.percentile(99.9), s.max]
                rows.append([s.key.display, Self.number(s.count), Self.number(s.rate)] + cells.map { $0.map(Self.seconds) ?? "-" })
            }
        }
        let widths = header.indices.map { i in ([header[i]] + rows.map { $0[i] }).map(\.count).max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, cell in
                i == 0 ? cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[i] - cell.count) + cell
            }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
        var out = "run: \(Self.number(duration)) s" + (shards.isEmpty ? "" : ", shards " + shards.map(\.description).joined(separator: " "))
        if let spread = spreadOfStarts { out += ", started \(Self.seconds(spread)) apart" }
        out += "\n"
        out += ([line(header)] + rows.map(line)).joined(separator: "\n")
        return out + "\n"
    }

    public static func number(_ v: Double) -> String {
        if v == v.rounded() && abs(v) < 1e15 { return String(Int64(v)) }
        return String(format: "%.2f", v)
    }

    /// A time in seconds, written in us, ms or s.
    public static func seconds(_ v: Double) -> String {
        if v == 0 { return "0" }
        if v < 1e-3 { return String(format: "%.0fus", v * 1e6) }
        if v < 1 { return String(format: "%.2fms", v * 1e3) }
        return String(format: "%.3fs", v)
    }
}
