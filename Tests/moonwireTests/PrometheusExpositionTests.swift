import MoonwireCore
import Testing

@testable import moonwire

/// How snapshots become swift-prometheus collectors, scrape after scrape.
@Suite(.timeLimit(.minutes(5))) struct PrometheusExpositionTests {
    final class Warnings: @unchecked Sendable {
        var lines: [String] = []
    }

    static func lines(_ text: String, _ prefix: String) -> [String] {
        text.split(separator: "\n").map(String.init).filter { $0.hasPrefix(prefix) }.sorted()
    }

    @Test func histogramsAreBucketedAndKeepTheirExactQuantiles() throws {
        let m = MetricsRegistry()
        let h = try m.register(.histogram, name: "request_latency")
        let exposition = PrometheusExposition { _ in }
        m.observe(h, 0.003)
        m.observe(h, 0.003)
        var text = exposition.render(m.snapshot(duration: 1))
        #expect(text.contains("# TYPE moonwire_request_latency_seconds histogram"), "\(text)")
        #expect(text.contains(#"moonwire_request_latency_seconds_bucket{le="0.0025"} 0"#), "\(text)")
        #expect(text.contains(#"moonwire_request_latency_seconds_bucket{le="0.005"} 2"#), "\(text)")
        // A later scrape adds only what came since.
        m.observe(h, 0.2)
        text = exposition.render(m.snapshot(duration: 2))
        #expect(text.contains(#"moonwire_request_latency_seconds_bucket{le="0.005"} 2"#), "\(text)")
        #expect(text.contains(#"moonwire_request_latency_seconds_bucket{le="0.25"} 3"#), "\(text)")
        #expect(text.contains(#"moonwire_request_latency_seconds_bucket{le="+Inf"} 3"#), "\(text)")
        #expect(text.contains("moonwire_request_latency_seconds_count 3"), "\(text)")
        #expect(text.contains("# TYPE moonwire_request_latency_quantile_seconds gauge"), "\(text)")
        let max = try #require(Self.lines(text, #"moonwire_request_latency_quantile_seconds{quantile="1"}"#).first)
        let value = try #require(Double(max.split(separator: " ").last!))
        #expect(abs(value - 0.2) <= 0.2 * 0.001, "\(max)")
        // A scrape with nothing new since shows the same histogram lines (it is not decoded again).
        let again = exposition.render(m.snapshot(duration: 3))
        #expect(Self.lines(again, "moonwire_request_latency") == Self.lines(text, "moonwire_request_latency"), "\(again)")
    }

    @Test func emptyHistogramsHaveNoQuantilesYet() throws {
        let m = MetricsRegistry()
        _ = try m.register(.histogram, name: "ping_rtt")
        _ = try m.register(.histogram, name: "_seconds")
        let text = PrometheusExposition { _ in }.render(m.snapshot(duration: 1))
        #expect(text.contains("moonwire_ping_rtt_seconds_count 0"), "\(text)")
        #expect(text.contains("moonwire__seconds_seconds_count 0"), "\(text)")
        #expect(!text.contains("quantile"), "\(text)")
    }

    /// swift-prometheus refuses a family with labeled and unlabeled series; every
    /// series gets every label name, empty where it has none.
    @Test func seriesWithAndWithoutTagsShareTheirFamily() throws {
        let m = MetricsRegistry()
        let plain = try m.register(.counter, name: "jobs")
        m.add(plain)
        let exposition = PrometheusExposition { _ in }
        #expect(Self.lines(exposition.render(m.snapshot(duration: 1)), "moonwire_jobs_total") == ["moonwire_jobs_total 1"])
        // A tag that appears later registers the family again.
        m.add(try m.register(.counter, name: "jobs", tags: ["queue": "a"]), 3)
        m.add(plain)
        let text = exposition.render(m.snapshot(duration: 2, shard: Shard(index: 2, count: 3)))
        #expect(
            Self.lines(text, "moonwire_jobs_total") == [
                #"moonwire_jobs_total{queue="",shard="2/3"} 2"#, #"moonwire_jobs_total{queue="a",shard="2/3"} 3"#,
            ], "\(text)")
    }

    @Test func aNameTakenTwiceIsLeftOffWithAWarning() throws {
        let m = MetricsRegistry()
        m.add(try m.register(.counter, name: "a"), 5)
        m.set(try m.register(.gauge, name: "a_total"), 7)
        let warnings = Warnings()
        let exposition = PrometheusExposition { warnings.lines.append($0) }
        _ = exposition.render(m.snapshot(duration: 1))
        let text = exposition.render(m.snapshot(duration: 1))
        #expect(Self.lines(text, "moonwire_a_total") == ["moonwire_a_total 5"], "\(text)")
        #expect(warnings.lines == ["metric 'a_total' is not on /metrics: its Prometheus name moonwire_a_total is taken by metric 'a'"])
    }

    @Test func aHistogramTaggedLeIsLeftOffWithAWarning() throws {
        let m = MetricsRegistry()
        m.observe(try m.register(.histogram, name: "size", tags: ["le": "x"]), 1)
        let warnings = Warnings()
        let text = PrometheusExposition { warnings.lines.append($0) }.render(m.snapshot(duration: 1))
        #expect(!text.contains("moonwire_size"), "\(text)")
        #expect(warnings.lines == ["metric 'size' is not on /metrics: its tag 'le' is a label Prometheus histograms and quantiles use"])
    }

    @Test func countersAndGaugesFollowTheSnapshot() throws {
        let m = MetricsRegistry()
        let c = try m.register(.counter, name: "messages_in")
        let g = try m.register(.gauge, name: "connections_open")
        let exposition = PrometheusExposition { _ in }
        m.add(c, 10)
        m.set(g, 3)
        _ = exposition.render(m.snapshot(duration: 1))
        m.add(c, 5)
        m.set(g, 1)
        let text = exposition.render(m.snapshot(duration: 2))
        #expect(text.contains("# TYPE moonwire_messages_in_total counter"), "\(text)")
        #expect(Self.lines(text, "moonwire_messages_in_total ") == ["moonwire_messages_in_total 15"], "\(text)")
        #expect(Self.lines(text, "moonwire_connections_open ") == ["moonwire_connections_open 1.0"], "\(text)")
    }
}
