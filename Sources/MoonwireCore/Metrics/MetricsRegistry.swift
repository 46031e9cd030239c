import Histogram

/// The metrics of one run (one script, one event loop): counters, gauges and
/// HDR histograms, each named and tagged. Not thread-safe by design: each
/// runtime owns one and touches it only on its own loop, so recording a value
/// costs an array index and an add, with no lock. Runs spread over threads or
/// processes meet in `MetricsSnapshot.merge`.
///
/// ```swift
/// let metrics = MetricsRegistry()
/// let sent = try metrics.register(.counter, name: "orders_sent")
/// metrics.add(sent, 1)
/// let latency = try metrics.register(.histogram, name: "order_latency", tags: ["venue": "x"])
/// metrics.observe(latency, 0.012)   // seconds
/// let snapshot = metrics.snapshot(duration: 10)
/// ```
public final class MetricsRegistry {
    /// A registered metric: an index into the registry's storage.
    public struct ID: Hashable, Sendable {
        public let index: Int
    }

    public enum Kind: String, Codable, Sendable {
        case counter, gauge, histogram
    }

    /// Why a metric could not be registered.
    public enum RegistrationError: Error, CustomStringConvertible, Equatable {
        case badName(String)
        case badTagName(String)
        case kindConflict(name: String, existing: Kind, requested: Kind)

        public var description: String {
            switch self {
            case .badName(let name):
                "metric name '\(name)' is not a Prometheus name (letters, digits, _ and :, not starting with a digit)"
            case .badTagName(let name):
                "tag name '\(name)' is not a Prometheus label name (letters, digits and _, not starting with a digit or __)"
            case .kindConflict(let name, let existing, let requested):
                "metric '\(name)' is already a \(existing.rawValue), not a \(requested.rawValue)"
            }
        }
    }

    /// Histograms hold values in millionths (microseconds for seconds): HDR
    /// histograms count integers.
    public static let histogramScale = 1_000_000.0

    struct Entry {
        let key: MetricKey
        let kind: Kind
        var value: Double = 0
        var high: Double = 0
        var histogram: Histogram<UInt64>?
    }

    private(set) var entries: [Entry] = []
    private var index: [MetricKey: Int] = [:]

    public init() {}

    /// The metric with this name and tags, created on first use. Registering
    /// the same name and tags again returns the same metric.
    public func register(_ kind: Kind, name: String, tags: [String: String] = [:]) throws(RegistrationError) -> ID {
        guard MetricKey.isValidName(name) else { throw .badName(name) }
        for tag in tags.keys where !MetricKey.isValidTagName(tag) { throw .badTagName(tag) }
        if let existing = entries.first(where: { $0.key.name == name && $0.kind != kind }) {
            throw .kindConflict(name: name, existing: existing.kind, requested: kind)
        }
        let key = MetricKey(name: name, tags: tags)
        if let i = index[key] { return ID(index: i) }
        var entry = Entry(key: key, kind: kind)
        if kind == .histogram { entry.histogram = Self.makeHistogram() }
        entries.append(entry)
        index[key] = entries.count - 1
        return ID(index: entries.count - 1)
    }

    static func makeHistogram() -> Histogram<UInt64> {
        Histogram<UInt64>(numberOfSignificantValueDigits: .three)
    }

    /// Counter: adds `amount` (not negative).
    @inline(__always)
    public func add(_ id: ID, _ amount: Double = 1) {
        entries[id.index].value += amount
    }

    /// Gauge: sets the value; the highest value it ever had is kept too.
    @inline(__always)
    public func set(_ id: ID, _ value: Double) {
        entries[id.index].value = value
        if value > entries[id.index].high { entries[id.index].high = value }
    }

    /// Gauge: adds `delta` (may be negative).
    public func change(_ id: ID, by delta: Double) {
        set(id, entries[id.index].value + delta)
    }

    /// Histogram: records `value` (seconds for times; at least 0).
    @inline(__always)
    public func observe(_ id: ID, _ value: Double) {
        let scaled = UInt64(Swift.max(0, (value * Self.histogramScale).rounded()))
        _ = entries[id.index].histogram?.record(scaled)
    }

    /// Histogram: records `value` and, as HdrHistogram does for coordinated
    /// omission, the values a run at a fixed `interval` would have seen while
    /// this one took `value` (value - interval, value - 2 interval, ...).
    public func observe(_ id: ID, _ value: Double, expectedInterval interval: Double) {
        let scaled = UInt64(Swift.max(0, (value * Self.histogramScale).rounded()))
        let step = UInt64(Swift.max(0, (interval * Self.histogramScale).rounded()))
        _ = entries[id.index].histogram?.recordCorrectedValue(scaled, expectedInterval: step)
    }

    public func value(_ id: ID) -> Double { entries[id.index].value }

    /// How many metrics are registered.
    public var count: Int { entries.count }

    /// Makes an ID from an index a binding was given (checked against `count`).
    public func id(at index: Int) -> ID? { (0..<entries.count).contains(index) ? ID(index: index) : nil }

    /// The current value of a metric by name and tags, if registered.
    public func find(_ name: String, tags: [String: String] = [:]) -> ID? {
        index[MetricKey(name: name, tags: tags)].map { ID(index: $0) }
    }

    /// Everything recorded so far, for the summary, the files and the scrape.
    public func snapshot(duration: Double, shard: Shard? = nil) -> MetricsSnapshot {
        MetricsSnapshot(
            duration: duration, shards: shard.map { [$0] } ?? [],
            metrics: entries.map { entry in
                MetricsSnapshot.Metric(
                    name: entry.key.name, tags: entry.key.tags, kind: entry.kind,
                    value: entry.kind == .histogram ? nil : entry.value,
                    max: entry.kind == .gauge ? entry.high : nil,
                    histogram: entry.histogram.map(EncodedHistogram.init)
                )
            }
        )
    }
}

/// A metric's identity: its name and tags.
public struct MetricKey: Hashable, Codable, Sendable, Comparable {
    public var name: String
    public var tags: [String: String]

    public init(name: String, tags: [String: String] = [:]) {
        self.name = name
        self.tags = tags
    }

    /// `name{a="1",b="2"}`, tags sorted: how the summary and the files show it.
    public var display: String {
        guard !tags.isEmpty else { return name }
        return name + "{" + tags.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }.joined(separator: ",") + "}"
    }

    public static func < (a: MetricKey, b: MetricKey) -> Bool { a.display < b.display }

    /// Prometheus metric names: [a-zA-Z_:][a-zA-Z0-9_:]*.
    public static func isValidName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !isDigit(first) else { return false }
        return name.utf8.allSatisfy { isWordByte($0) || $0 == UInt8(ascii: ":") }
    }

    /// Prometheus label names: [a-zA-Z_][a-zA-Z0-9_]*, and not __ (reserved).
    public static func isValidTagName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !isDigit(first), !name.hasPrefix("__") else { return false }
        return name.utf8.allSatisfy(isWordByte)
    }

    private static func isDigit(_ b: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) }
    private static func isWordByte(_ b: UInt8) -> Bool {
        isDigit(b) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
            || b == UInt8(ascii: "_")
    }
}

/// This process's part of a run spread over N: `index` of `count`, from 1.
public struct Shard: Codable, Hashable, Sendable, CustomStringConvertible {
    public let index: Int
    public let count: Int

    public init(index: Int, count: Int) {
        self.index = index
        self.count = count
    }

    public var description: String { "\(index)/\(count)" }

    /// `I/N` with 1 <= I <= N.
    public static func parse(_ text: String) -> Shard? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let i = Int(parts[0]), let n = Int(parts[1]), n >= 1, (1...n).contains(i) else { return nil }
        return Shard(index: i, count: n)
    }

    /// This shard's part of `total` (a rate or a number of sessions): the total
    /// divided by N, the remainder going to the first shards, so the parts add
    /// up to the total exactly.
    public func slice(of total: Int) -> Int {
        total / count + (index <= total % count ? 1 : 0)
    }

    /// This shard's part of a rate that need not be whole.
    public func slice(of rate: Double) -> Double { rate / Double(count) }
}
