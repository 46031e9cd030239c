import Foundation
import Histogram
import MoonwireCore
import Prometheus

/// The run's metrics as swift-prometheus collectors, written out by its
/// `PrometheusCollectorRegistry` in the Prometheus text format.
///
/// Every scrape brings the collectors up to date with a snapshot (the HDR
/// histograms stay the source of truth, merged across workers):
///
/// | moonwire | Prometheus |
/// |---|---|
/// | counter `NAME` | counter `moonwire_NAME_total` |
/// | gauge `NAME` | gauge `moonwire_NAME` |
/// | histogram `NAME` | histogram `moonwire_NAME_seconds` (``buckets``, `_sum`, `_count`), and gauge `moonwire_NAME_quantile_seconds{quantile="0.5"…"1"}` with the exact HDR percentiles |
///
/// A name that already ends in `_seconds` does not get it twice. Tags are labels;
/// a shard run adds `shard="I/N"`. Prometheus histograms only count values into
/// fixed buckets, so the quantile gauges carry the percentiles the summary
/// shows (within 0.1 %), which `histogram_quantile()` could only estimate.
///
/// ```swift
/// let exposition = PrometheusExposition { print($0) }
/// let text = exposition.render(runtime.metricsSnapshot())
/// ```
final class PrometheusExposition: @unchecked Sendable {
    /// Bucket bounds, in seconds: from 100 us (loopback) to 30 s (reconnects).
    static let buckets: [Double] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
    /// The quantile gauges; 1 is the maximum.
    static let quantiles: [Double] = [0.5, 0.9, 0.99, 0.999, 1]

    /// One histogram's collectors, and how many of each HDR bucket's values they
    /// were given: a scrape records only what came since the one before.
    private final class HistogramSeries {
        let histogram: ValueHistogram
        var quantiles: [Gauge] = []
        var recorded: [UInt64: UInt64] = [:]
        /// The HDR counts this series last showed: a histogram nothing was
        /// recorded in since (connect times, mostly) is not decoded again.
        var shown: EncodedHistogram?

        init(_ histogram: ValueHistogram) { self.histogram = histogram }
    }

    /// The label names a metric's series were registered with. The registry
    /// refuses a family with both unlabeled and labeled series, so every series
    /// of a name gets every label name of that name (an empty value where it has
    /// none, which Prometheus reads as no label); when a new tag name shows up,
    /// the name's collectors are registered again.
    private var labelNames: [String: [String]] = [:]
    private var counters: [MetricKey: Counter] = [:]
    private var gauges: [MetricKey: Gauge] = [:]
    private var histograms: [MetricKey: HistogramSeries] = [:]
    /// Which metric each Prometheus name belongs to: `a` as a counter and
    /// `a_total` as a gauge would both be `moonwire_a_total`.
    private var owners: [String: String] = [:]
    private var reported: Set<String> = []
    private let registry = PrometheusCollectorRegistry()
    private let lock = NSLock()
    private let warn: (String) -> Void

    /// `warn` hears once about each metric left off the scrape, and why.
    init(warn: @escaping (String) -> Void) {
        self.warn = warn
    }

    /// The exposition text with the values of `snapshot`.
    func render(_ snapshot: MetricsSnapshot) -> String {
        lock.lock()
        defer { lock.unlock() }
        let shard = snapshot.shards.first.map { [("shard", $0.description)] } ?? []
        var byName: [String: [MetricsSnapshot.Metric]] = [:]
        for metric in snapshot.metrics { byName[metric.name, default: []].append(metric) }
        for (name, series) in byName.sorted(by: { $0.key < $1.key }) {
            guard claim(Self.exposedNames(of: name, kind: series[0].kind), for: name) else { continue }
            let names = Set(series.flatMap(\.tags.keys)).union(shard.map(\.0)).sorted()
            if series[0].kind == .histogram, let reserved = names.first(where: { $0 == "le" || $0 == "quantile" }) {
                leaveOff(name, because: "its tag '\(reserved)' is a label Prometheus histograms and quantiles use")
                continue
            }
            if let registered = labelNames[name], registered != names { unregister(name) }
            labelNames[name] = names
            for metric in series {
                let tags = metric.tags.merging(shard) { own, _ in own }
                update(metric, labels: names.map { ($0, tags[$0] ?? "") }, duration: snapshot.duration)
            }
        }
        return registry.emitToString()
    }

    /// A metric's Prometheus name: `moonwire_NAME_UNIT`.
    private static func descriptor(_ name: String, unit: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "moonwire", metricName: name, unitName: unit, helpText: "")
    }

    /// The family a metric is, and for a histogram the quantile gauges' family.
    static func descriptors(of name: String, kind: MetricsRegistry.Kind) -> [MetricNameDescriptor] {
        switch kind {
        case .counter: return [descriptor(name, unit: "total")]
        case .gauge: return [descriptor(name, unit: "")]
        case .histogram:
            // swift-prometheus traps on an empty name: "_seconds" keeps its own.
            let base = name.hasSuffix("_seconds") && name.count > 8 ? String(name.dropLast(8)) : name
            return [descriptor(base, unit: "seconds"), descriptor(base + "_quantile", unit: "seconds")]
        }
    }

    /// Every name a metric's lines start with (a histogram's `_bucket`, `_sum` and `_count` too).
    static func exposedNames(of name: String, kind: MetricsRegistry.Kind) -> [String] {
        let families = descriptors(of: name, kind: kind).map(\.name)
        guard kind == .histogram else { return families }
        return families + ["_bucket", "_sum", "_count"].map { families[0] + $0 }
    }

    private func claim(_ names: [String], for metric: String) -> Bool {
        if let taken = names.first(where: { owners[$0].map { $0 != metric } ?? false }) {
            leaveOff(metric, because: "its Prometheus name \(taken) is taken by metric '\(owners[taken]!)'")
            return false
        }
        for n in names { owners[n] = metric }
        return true
    }

    private func leaveOff(_ metric: String, because reason: String) {
        if reported.insert(metric).inserted { warn("metric '\(metric)' is not on /metrics: \(reason)") }
    }

    private func update(_ metric: MetricsSnapshot.Metric, labels: [(String, String)], duration: Double) {
        let key = metric.key
        let families = Self.descriptors(of: metric.name, kind: metric.kind)
        switch metric.kind {
        case .counter:
            let counter = counters[key] ?? registry.makeCounter(descriptor: families[0], labels: labels)
            counters[key] = counter
            let value = max(0, metric.value ?? 0)  // swift-prometheus traps on a negative increment
            counter.reset()
            if value == value.rounded(), abs(value) < 1e15 { counter.increment(by: Int64(value)) } else { counter.increment(by: value) }
        case .gauge:
            let gauge = gauges[key] ?? registry.makeGauge(descriptor: families[0], labels: labels)
            gauges[key] = gauge
            gauge.set(to: metric.value ?? 0)
        case .histogram:
            let series = histograms[key] ?? HistogramSeries(registry.makeValueHistogram(descriptor: families[0], labels: labels, buckets: Self.buckets))
            histograms[key] = series
            guard metric.histogram != series.shown else { return }
            series.shown = metric.histogram
            let decoded = metric.histogram?.decode()
            if let hdr = decoded {
                for bucket in hdr.recordedValues() {
                    let before = series.recorded[bucket.value] ?? 0
                    guard bucket.count > before else { continue }
                    // The low end of the HDR bucket: a value of exactly 0.25 s counts as le="0.25".
                    let seconds = Double(hdr.lowestEquivalentForValue(bucket.value)) / MetricsRegistry.histogramScale
                    for _ in before..<bucket.count { series.histogram.record(seconds) }
                    series.recorded[bucket.value] = bucket.count
                }
            }
            let statistics = MetricStatistics(metric, decoded: decoded, duration: duration)
            guard statistics.count > 0 else { return }
            if series.quantiles.isEmpty {
                series.quantiles = Self.quantiles.map { q in
                    registry.makeGauge(descriptor: families[1], labels: labels + [("quantile", Self.label(q))])
                }
            }
            for (gauge, q) in zip(series.quantiles, Self.quantiles) { gauge.set(to: statistics.percentile(q * 100) ?? 0) }
        }
    }

    /// Drops a metric's collectors, to register them again with other label names.
    private func unregister(_ name: String) {
        for (key, counter) in counters where key.name == name {
            registry.unregisterCounter(counter)
            counters[key] = nil
        }
        for (key, gauge) in gauges where key.name == name {
            registry.unregisterGauge(gauge)
            gauges[key] = nil
        }
        for (key, series) in histograms where key.name == name {
            registry.unregisterValueHistogram(series.histogram)
            series.quantiles.forEach(registry.unregisterGauge)
            histograms[key] = nil
        }
    }

    private static func label(_ q: Double) -> String {
        q == q.rounded() ? String(Int(q)) : String(q)
    }
}
