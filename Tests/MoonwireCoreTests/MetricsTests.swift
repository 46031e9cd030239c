import Foundation
import MoonwireCore
import Testing

/// The metrics registry, summary files, merges, thresholds and shards, without Lua.
@Suite(.timeLimit(.minutes(5))) struct MetricsTests {
    @Test func namesFollowPrometheusRules() throws {
        let m = MetricsRegistry()
        for good in ["a", "request_latency", "ns:sub_total", "_x9"] { _ = try m.register(.counter, name: good) }
        for bad in ["", "9lives", "with space", "dash-ed", "é"] {
            #expect(throws: MetricsRegistry.RegistrationError.badName(bad)) { try m.register(.counter, name: bad) }
        }
        #expect(throws: MetricsRegistry.RegistrationError.badTagName("__reserved")) {
            try m.register(.counter, name: "x", tags: ["__reserved": "1"])
        }
        #expect(throws: MetricsRegistry.RegistrationError.badTagName("a:b")) { try m.register(.counter, name: "x", tags: ["a:b": "1"]) }
        #expect(throws: MetricsRegistry.RegistrationError.kindConflict(name: "a", existing: .counter, requested: .gauge)) {
            try m.register(.gauge, name: "a")
        }
        #expect(try m.register(.counter, name: "a") == m.register(.counter, name: "a"))
    }

    @Test func histogramsReportHDRPercentiles() throws {
        let m = MetricsRegistry()
        let h = try m.register(.histogram, name: "t")
        for i in 1...1000 { m.observe(h, Double(i) / 1000) }
        let s = try #require(m.snapshot(duration: 2).statistics().first)
        #expect(s.count == 1000)
        #expect(s.rate == 500)
        // Three significant digits: within 0.1 %.
        for (p, v) in [(50.0, 0.5), (90, 0.9), (99, 0.99), (99.9, 0.999)] {
            let got = try #require(s.percentile(p))
            #expect(abs(got - v) <= v * 0.001, "p\(p): \(got)")
        }
    }

    /// Splitting values over several registries, encoding, decoding and
    /// merging gives the very histogram one registry would have had.
    @Test func mergeIsExact() throws {
        let whole = MetricsRegistry()
        let parts = (0..<4).map { _ in MetricsRegistry() }
        let hw = try whole.register(.histogram, name: "lat")
        let cw = try whole.register(.counter, name: "n", tags: ["k": "v"])
        var ids: [(MetricsRegistry.ID, MetricsRegistry.ID)] = []
        for p in parts { ids.append((try p.register(.histogram, name: "lat"), try p.register(.counter, name: "n", tags: ["k": "v"]))) }
        for i in 0..<10_000 {
            let v = Double((i * 7919) % 100_003) / 1e4
            whole.observe(hw, v)
            whole.add(cw)
            parts[i % 4].observe(ids[i % 4].0, v)
            parts[i % 4].add(ids[i % 4].1)
        }
        let encoded = try parts.enumerated().map { i, p in
            try MetricsSnapshot.decode(p.snapshot(duration: 1, shard: Shard(index: i + 1, count: 4)).encoded(), from: "part")
        }
        let merged = try MetricsSnapshot.merge(encoded)
        let one = whole.snapshot(duration: 1)
        #expect(merged.shards.map(\.description) == ["1/4", "2/4", "3/4", "4/4"])
        let mh = try #require(merged.metrics.first { $0.name == "lat" }?.histogram)
        let oh = try #require(one.metrics.first { $0.name == "lat" }?.histogram)
        #expect(mh == oh)
        #expect(merged.metrics.first { $0.name == "n" }?.value == 10_000)
    }

    /// A decoded histogram, sized for its highest value at once, has the buckets and
    /// figures of the one recorded, from 0 to an hour.
    @Test func decodingKeepsEveryFigure() throws {
        let m = MetricsRegistry()
        let h = try m.register(.histogram, name: "lat")
        for v in [0, 0.000_001, 0.0031, 0.25, 1.5, 3600] { m.observe(h, v) }
        let metric = try #require(m.snapshot(duration: 1).metrics.first { $0.name == "lat" })
        let encoded = try #require(metric.histogram)
        let decoded = encoded.decode()
        #expect(decoded.recordedValues().map { [$0.value, $0.count] } == encoded.counts)
        let fresh = MetricStatistics(metric, duration: 1)
        let given = MetricStatistics(metric, decoded: decoded, duration: 1)
        for name in ["count", "min", "max", "avg", "p50", "p99", "p100"] {
            #expect(fresh.statistic(name) == given.statistic(name), "\(name)")
        }
        #expect(abs((fresh.max ?? 0) - 3600) <= 3600 * 0.001)
        #expect(abs((fresh.mean ?? 0) - 3601.753_101 / 6) <= 1)
    }

    /// Each metric's unit in the summary file: times for histograms, bytes for what is
    /// named in bytes (counters and gauges alike), a plain number for the rest.
    @Test func summaryUnitsFollowTheMetricsNames() throws {
        let m = MetricsRegistry()
        _ = try m.register(.histogram, name: "lat")
        _ = try m.register(.counter, name: "bytes_in")
        _ = try m.register(.gauge, name: "buffered_bytes")
        _ = try m.register(.counter, name: "messages_in")
        _ = try m.register(.gauge, name: "connections_open")
        let decoded = try MetricsSnapshot.decode(m.snapshot(duration: 1).encoded(), from: "summary")
        let units = Dictionary(uniqueKeysWithValues: decoded.metrics.map { ($0.name, $0.unit ?? "") })
        #expect(units == ["lat": "s", "bytes_in": "bytes", "buffered_bytes": "bytes", "messages_in": "1", "connections_open": "1"])
    }

    @Test func thresholdsParseAndCheck() throws {
        let m = MetricsRegistry()
        let h = try m.register(.histogram, name: "lat")
        for i in 1...100 { m.observe(h, Double(i) / 100) }
        _ = try m.register(.counter, name: "dropped")
        let s = m.snapshot(duration: 1)
        // HDR values: the highest value of the bucket, within 0.1 %.
        guard case .pass(let p50) = try Threshold(expression: "lat:p50 < 0.6").check(s) else { Issue.record("p50"); return }
        #expect(abs(p50 - 0.5) <= 0.0005)
        guard case .fail(let max) = try Threshold(expression: "lat:max<=0.5").check(s) else { Issue.record("max"); return }
        #expect(abs(max - 1) <= 0.001)
        #expect(try Threshold(key: "dropped:count", condition: "== 0").check(s) == .pass(0))
        #expect(try Threshold(expression: "other:count == 0").check(s) == .unknownMetric)
        for bad in ["lat p50 < 1", "lat:p50", "lat:p50 < x", "lat:median < 1", "lat:p50 =< 1", "9x:count < 1"] {
            #expect(throws: Threshold.ParseError.self, "\(bad)") { try Threshold(expression: bad) }
        }
    }

    @Test func shardsSplitTotalsExactly() {
        #expect(Shard.parse("2/4") == Shard(index: 2, count: 4))
        for bad in ["3/2", "0/0", "0/3", "1", "a/b", "1/2/3", "-1/2"] { #expect(Shard.parse(bad) == nil, "\(bad)") }
        for total in [0, 1, 7, 100, 1001] {
            #expect((1...4).map { Shard(index: $0, count: 4).slice(of: total) }.reduce(0, +) == total)
        }
    }
}
