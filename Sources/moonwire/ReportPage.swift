import Foundation
import Histogram
import MoonwireCore
import MoonwireLua

/// The report of a run (or of its shards together) as one HTML file: its
/// style and script are inline (resources/report.css, report.js) and the
/// charts are SVG, so it opens offline and nothing is fetched.
struct ReportPage {
    /// The JSON-lines files, one per shard: the charts over time.
    var timelines: [MetricsTimeline]
    /// The summaries merged (exact HDR histograms): the distributions, the
    /// table and the thresholds. Without it they come from the files' last lines.
    var summary: MetricsSnapshot?
    var thresholds: [Threshold]
    var notes: [String] = []

    /// The histograms the latency charts show, when they have values.
    static let latencies = [
        ("request_latency", "Request latency"), ("expect_latency", "Expect latency"), ("iteration_duration", "Iteration duration"),
    ]
    static let connectSteps = [
        ("connect_dns", "dns"), ("connect_tcp", "tcp"), ("connect_tls", "tls"), ("connect_handshake", "handshake"),
        ("connect_time", "connect_time"),
    ]

    func html() -> String {
        let series = ReportSeries(timelines)
        let rows = summaryRows()
        let command = timelines.lazy.compactMap(\.command).first
        let script = command?.first { $0.hasSuffix(".lua") }.map { URL(fileURLWithPath: $0).lastPathComponent }
        var body = "<header><h1>moonwire report" + (script.map { ": " + ReportFormat.html($0) } ?? "") + "</h1>"
        if let command { body += "<pre class=\"command\"><code>$ \(ReportFormat.html(ReportFormat.shell(command)))</code></pre>" }
        body += facts(rows) + "</header>\n"
        let allNotes = notes + timelines.compactMap(\.note) + (series.hasIntervals ? [] : ["The metrics file has no per-second histogram figures (written by an older moonwire): latency over time shows the percentiles since the start."])
        if !allNotes.isEmpty {
            body += "<section class=\"notes\">" + allNotes.map { "<p>\(ReportFormat.html($0))</p>" }.joined() + "</section>\n"
        }
        body += thresholdSection(rows)
        body += overTime(series)
        body += distributions()
        body += table(rows)
        let quiet = rows.filter { $0.isHistogram && $0.count == 0 }.map(\.name)
        if !quiet.isEmpty {
            body += "<p class=\"quiet\">No values in this run: \(quiet.map(ReportFormat.html).joined(separator: ", ")).</p>\n"
        }
        let css = String(decoding: PackageResources.report_css, as: UTF8.self)
        let js = String(decoding: PackageResources.report_js, as: UTF8.self)
        let title = "moonwire report" + (script.map { ": " + $0 } ?? "")
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="color-scheme" content="light dark"><meta name="generator" content="moonwire \(ScriptRuntime.version)">
            <title>\(ReportFormat.html(title))</title><style>\(css)</style></head>
            <body>
            \(body)<script>\(js)</script>
            </body></html>

            """
    }

    // MARK: Header

    private func facts(_ rows: [Row]) -> String {
        var items: [(String, String)] = []
        if let start = timelines.compactMap(\.start).min() {
            let format = ISO8601DateFormatter()
            format.formatOptions = [.withFullDate, .withTime, .withColonSeparatorInTime, .withSpaceBetweenDateAndTime]
            items.append(("started", format.string(from: start) + " UTC"))
        }
        let duration = summary?.duration ?? timelines.map(\.duration).max() ?? 0
        items.append(("duration", ReportFormat.clock(duration)))
        let shards = summary?.shards.map(\.description) ?? timelines.compactMap(\.shard)
        if !shards.isEmpty { items.append(("shards", shards.joined(separator: ", "))) }
        let parts = max(timelines.count, summary?.shards.count ?? 0)
        if parts > 1 { items.append(("merged", "\(parts) shards in one report")) }
        func total(_ name: String) -> Double? { rows.first { $0.name == name }?.count }
        if let sent = total("messages_out"), let received = total("messages_in") {
            items.append(("messages", "\(ReportFormat.grouped(sent)) out, \(ReportFormat.grouped(received)) in"))
        }
        if let errors = total("errors") { items.append(("errors", ReportFormat.grouped(errors))) }
        if let latency = rows.first(where: { $0.name == "request_latency" && $0.count > 0 }), let p99 = latency.p99 {
            items.append(("request p99", ReportUnit.seconds.format(p99)))
        }
        return "<dl class=\"facts\">" + items.map { "<div><dt>\($0.0)</dt><dd>\(ReportFormat.html($0.1))</dd></div>" }.joined() + "</dl>"
    }

    // MARK: Over time

    private func overTime(_ series: ReportSeries) -> String {
        guard !series.times.isEmpty else { return "" }
        let times = series.times
        var charts = ""
        func chart(_ id: String, _ title: String, _ unit: ReportUnit, log: Bool = false, _ parts: [(String, String, (String) -> [Double?])], note: String? = nil) {
            let present = parts.filter { series.has($0.1) }
            guard !present.isEmpty else { return }
            charts += ReportChart.lines(
                id: id, title: title, unit: unit, log: log, times: times,
                series: present.map { ReportChart.Series(label: $0.0, values: $0.2($0.1)) }, note: note)
        }
        chart("messages", "Messages per second", .perSecond, [("out", "messages_out", series.rate), ("in", "messages_in", series.rate)])
        for (name, title) in Self.latencies where (series.intervalCount(name).compactMap { $0 }.max() ?? 0) > 0 {
            chart(
                name, title + (series.hasIntervals ? ", second by second" : " since the start"), .seconds, log: true,
                ["p50", "p90", "p99", "max"].map { field in (field, name, { series.percentile($0, field) }) },
                note: "Log scale. Each point holds the values recorded in the second before it.")
        }
        chart("connections", "Connections open", .plain, [("open", "connections_open", series.gauge)])
        chart("reconnects", "Reconnects per second", .perSecond, [("reconnects", "reconnects", series.rate)])
        if (series.intervalCount("recover_time").compactMap { $0 }.max() ?? 0) > 0 {
            chart("recover", "Recover time (lost to open again)", .seconds, log: true, [
                ("p50", "recover_time", { series.percentile($0, "p50") }), ("max", "recover_time", { series.percentile($0, "max") }),
            ])
        }
        chart("errors", "Errors and drops per second", .perSecond, [
            ("errors", "errors", series.rate), ("dropped", "dropped", series.rate), ("refused", "refused", series.rate),
        ])
        chart("queue", "Messages waiting in send queues", .plain, [("queued", "queue_depth", series.gauge)])
        chart("buffered", "Bytes waiting to be sent", .bytes, [("buffered", "buffered_bytes", series.gauge)])
        return "<section><h2>Over time</h2><div class=\"grid\">\n\(charts)</div></section>\n"
    }

    // MARK: Distributions

    private func distributions() -> String {
        guard let summary else { return "" }
        var charts = ""
        var steps: [(label: String, p50: Double, p99: Double)] = []
        for s in summary.statistics() where s.kind == .histogram && s.count > 0 {
            let name = s.key.display
            if let step = Self.connectSteps.first(where: { $0.0 == name }), let p50 = s.percentile(50), let p99 = s.percentile(99) {
                steps.append((step.1, p50, p99))
                continue
            }
            guard let metric = summary.metrics.first(where: { $0.key == s.key }), let encoded = metric.histogram else { continue }
            let unit = ReportUnit.of(name)
            let (bins, zeros) = Self.bins(encoded.decode())
            guard !bins.isEmpty else { continue }
            let markers = [("p50", 50.0), ("p90", 90), ("p99", 99)].compactMap { label, p in s.percentile(p).map { (label, $0) } }
                + [("max", s.max ?? 0)]
            let note = zeros > 0 ? "\(ReportFormat.grouped(Double(zeros))) values of 0 are not on the log scale." : nil
            charts += ReportChart.histogram(
                id: "dist-" + s.key.name, title: name + " (" + ReportFormat.grouped(s.count) + " values)", unit: unit,
                bins: bins, total: UInt64(s.count), markers: markers.filter { $0.1 > 0 }, note: note)
        }
        steps.sort { a, b in Self.connectSteps.firstIndex { $0.1 == a.label }! < Self.connectSteps.firstIndex { $0.1 == b.label }! }
        if !steps.isEmpty {
            charts = ReportChart.steps(
                id: "connect-steps", title: "Connect time by step", rows: steps,
                note: "dns + tcp (+ tls) (+ handshake) add up to a dial; connect_time counts from mw.connect to the first open.") + charts
        }
        guard !charts.isEmpty else { return "" }
        return "<section><h2>Distributions</h2><div class=\"grid\">\n\(charts)</div></section>\n"
    }

    /// The HDR buckets gathered into 10 bins a decade (bounds in seconds or
    /// the metric's unit), and how many values were 0.
    static func bins(_ h: Histogram<UInt64>) -> ([(low: Double, high: Double, count: UInt64)], UInt64) {
        var counts: [Int: UInt64] = [:]
        var zeros: UInt64 = 0
        for v in h.recordedValues() {
            guard v.value > 0 else {
                zeros += v.count
                continue
            }
            counts[Int(floor(log10(Double(v.value) / MetricsRegistry.histogramScale) * 10 + 1e-9)), default: 0] += v.count
        }
        let bins = counts.keys.sorted().map { k in (low: pow(10, Double(k) / 10), high: pow(10, Double(k + 1) / 10), count: counts[k]!) }
        return (bins, zeros)
    }

    // MARK: Summary and thresholds

    /// One metric's figures in the table.
    struct Row {
        var name: String
        var kind: String
        var isHistogram: Bool
        var count: Double
        var rate: Double?
        var min, p50, p90, p99, p999, max: Double?
    }

    /// From the summary when given (exact), else from each file's last line
    /// (counts added, percentiles the highest file's).
    private func summaryRows() -> [Row] {
        if let summary {
            return summary.statistics().map { s in
                Row(
                    name: s.key.display, kind: s.kind.rawValue, isHistogram: s.kind == .histogram, count: s.count,
                    rate: s.kind == .gauge ? nil : s.rate, min: s.min, p50: s.percentile(50), p90: s.percentile(90),
                    p99: s.percentile(99), p999: s.percentile(99.9), max: s.max)
            }
        }
        let duration = timelines.map(\.duration).max() ?? 0
        var rows: [String: Row] = [:]
        for timeline in timelines {
            for (name, entry) in timeline.last {
                let isHistogram = entry["interval_count"] != nil || entry["p50"] != nil
                var row = rows[name] ?? Row(name: name, kind: isHistogram ? "histogram" : entry["max"] != nil ? "gauge" : "counter", isHistogram: isHistogram, count: 0)
                row.count += entry["count"] ?? 0
                row.rate = row.kind == "gauge" ? nil : row.count / max(duration, 1e-9)
                func highest(_ a: Double?, _ b: Double?) -> Double? { [a, b].compactMap { $0 }.max() }
                row.p50 = highest(row.p50, entry["p50"])
                row.p90 = highest(row.p90, entry["p90"])
                row.p99 = highest(row.p99, entry["p99"])
                row.max = highest(row.max, entry["max"])
                rows[name] = row
            }
        }
        return rows.values.sorted { $0.name < $1.name }
    }

    private func table(_ rows: [Row]) -> String {
        guard !rows.isEmpty else { return "" }
        var out = "<section><h2>Summary</h2>"
        if summary == nil {
            out += "<p class=\"chart-note\">From the last line of the metrics file: give the summary file (run --summary-json) for min and p99.9 and exact merged percentiles.</p>"
        }
        out += "<div class=\"scroll\"><table class=\"summary\"><thead><tr><th>metric</th><th>kind</th><th>count</th><th>rate</th><th>min</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr></thead><tbody>"
        for row in rows {
            let unit = ReportUnit.of(row.name)
            let countUnit: ReportUnit = row.isHistogram ? .plain : unit
            var cells = [countUnit.format(row.count)]
            cells.append(row.rate.map { row.isHistogram || unit != .bytes ? ReportUnit.perSecond.format($0) : ReportUnit.bytesPerSecond.format($0) } ?? "")
            let figures = row.isHistogram ? [row.min, row.p50, row.p90, row.p99, row.p999, row.max] : [nil, nil, nil, nil, nil, row.kind == "gauge" ? row.max : nil]
            cells += figures.map { v in v.map { (row.isHistogram ? unit : countUnit).format($0) } ?? (row.isHistogram && row.count == 0 ? "–" : "") }
            out += "<tr><th>\(ReportFormat.html(row.name))</th><td class=\"kind\">\(row.kind)</td>" + cells.map { "<td>\(ReportFormat.html($0))</td>" }.joined() + "</tr>"
        }
        return out + "</tbody></table></div></section>\n"
    }

    private func thresholdSection(_ rows: [Row]) -> String {
        guard !thresholds.isEmpty else { return "" }
        var out = "<section><h2>Thresholds</h2><table class=\"thresholds\"><tbody>"
        for t in thresholds {
            let unit = ["count", "rate"].contains(t.statistic) ? ReportUnit.plain : ReportUnit.of(t.metric)
            let (verdict, value): (String, String)
            switch check(t, rows) {
            case .pass(let v): (verdict, value) = ("pass", unit.format(v))
            case .fail(let v): (verdict, value) = ("FAIL", unit.format(v))
            case .noData: (verdict, value) = ("FAIL", "no data")
            case .unknownMetric: (verdict, value) = ("FAIL", "no such metric in this run")
            }
            out += "<tr class=\"\(verdict.lowercased())\"><td class=\"verdict\">\(verdict)</td><td><code>\(ReportFormat.html(t.description))</code></td><td>\(ReportFormat.html(value))</td></tr>"
        }
        return out + "</tbody></table></section>\n"
    }

    /// Exact against the summary; else against the last lines' figures,
    /// which have count, rate, value, p50, p90, p99 and max.
    private func check(_ t: Threshold, _ rows: [Row]) -> Threshold.Outcome {
        if let summary { return t.check(summary) }
        let same = rows.filter { $0.name == t.metric || $0.name.hasPrefix(t.metric + "{") }
        guard !same.isEmpty else { return .unknownMetric }
        let figures: [String: (Row) -> Double?] = [
            "count": \.count, "value": \.count, "rate": \.rate, "p50": \.p50, "p90": \.p90, "p99": \.p99, "max": \.max,
        ]
        guard let figure = figures[t.statistic] else { return .noData }
        let values = same.compactMap(figure)
        guard !values.isEmpty else { return .noData }
        let actual = ["count", "value", "rate"].contains(t.statistic) ? values.reduce(0, +) : values.max()!
        return t.comparison.holds(actual, t.bound) ? .pass(actual) : .fail(actual)
    }
}
