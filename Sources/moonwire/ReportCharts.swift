import Foundation

/// The report's charts, written as SVG: the drawing is in the file, so it
/// shows without scripts, prints, and every point is in the DOM. Colours come
/// from the page's CSS (light and dark); report.js only adds the hover readout.
enum ReportChart {
    static let width = 720.0
    static let height = 220.0
    /// The plot area inside the SVG: left, top, width, height.
    static let box = (left: 64.0, top: 10.0, width: 646.0, height: 182.0)

    struct Series {
        var label: String
        var values: [Double?]
    }

    /// Lines over time; `log` for latencies, whose stalls are orders of
    /// magnitude above the usual. Series of many points keep, per pixel
    /// column, their lowest and highest value, so a one-second spike or dip
    /// in an hour still shows.
    static func lines(id: String, title: String, unit: ReportUnit, log: Bool = false, times: [Double], series: [Series], note: String? = nil) -> String {
        let end = max(times.last ?? 1, 1e-3)
        let values = series.flatMap { $0.values.compactMap { $0 } }
        let axis = log ? Axis.logarithmic(values) : Axis.linear(values, unit: unit)
        let b = box
        func x(_ t: Double) -> Double { b.left + t / end * b.width }
        var svg = open(id: id, kind: "time", extra: "data-unit=\"\(unit.rawValue)\" data-end=\"\(end)\" \(axis.attributes)")
        svg += grid(axis, unit: unit)
        svg += timeTicks(end: end, x: x)
        var legend = ""
        for (i, s) in series.enumerated() {
            let points = decimate(s.values.enumerated().compactMap { i, v in v.map { Point(t: times[i], v: $0, index: i) } }, columns: Int(b.width))
            // Missing values before each index: one between two points breaks the line.
            var missing = [Int](repeating: 0, count: s.values.count + 1)
            for (i, v) in s.values.enumerated() { missing[i + 1] = missing[i] + (v == nil ? 1 : 0) }
            var d = ""
            var previous: Int?
            for p in points {
                let gap = previous.map { missing[p.index] != missing[$0] } ?? true
                d += (gap ? "M" : "L") + coordinate(x(p.t)) + "," + coordinate(axis.y(p.v))
                previous = p.index
            }
            if points.count == 1 { d += "h0.01" }
            svg += "<path class=\"line k\(i)\" d=\"\(d)\"><title>\(ReportFormat.html(s.label))</title></path>"
            let present = s.values.compactMap { $0 }
            let stats = present.isEmpty
                ? "no data"
                : "avg " + unit.format(present.reduce(0, +) / Double(present.count)) + " · max " + unit.format(present.max()!)
            legend += "<li><i class=\"k\(i)\"></i>\(ReportFormat.html(s.label)) <span>\(stats)</span></li>"
        }
        svg += "</svg>"
        return figure(title: title, legend: legend, svg: svg, note: note)
    }

    /// A distribution: how many values fell in each of 10 bins a decade, on a
    /// log axis, with the percentiles marked.
    static func histogram(id: String, title: String, unit: ReportUnit, bins: [(low: Double, high: Double, count: UInt64)], total: UInt64, markers: [(String, Double)], note: String?) -> String {
        let b = box
        let low = bins.first?.low ?? 1
        let high = bins.last?.high ?? 10
        let axis = Axis.logarithmic([low, high])
        func x(_ v: Double) -> Double { b.left + (log10(max(v, axis.low)) - log10(axis.low)) / (log10(axis.high) - log10(axis.low)) * b.width }
        let peak = Double(bins.map(\.count).max() ?? 1) / Double(max(total, 1)) * 100
        let share = Axis.linear([peak])
        var svg = open(id: id, kind: "bars", extra: "data-unit=\"%\" \(share.attributes)")
        svg += grid(share, unit: .plain, suffix: " %")
        for decade in axis.ticks {
            svg += "<text class=\"tick x\" x=\"\(coordinate(x(decade)))\" y=\"\(b.top + b.height + 16)\">\(ReportFormat.tick(unit.format(decade)))</text>"
        }
        for bin in bins {
            let pct = Double(bin.count) / Double(max(total, 1)) * 100
            // A bin of a few values among many still shows: at least 2 px.
            let top = min(share.y(pct), b.top + b.height - 2)
            let left = x(bin.low)
            svg += "<rect class=\"bar\" x=\"\(coordinate(left))\" y=\"\(coordinate(top))\" width=\"\(coordinate(max(0.5, x(bin.high) - left - 0.5)))\" height=\"\(coordinate(b.top + b.height - top))\">"
            svg += "<title>\(unit.format(bin.low)) to \(unit.format(bin.high)): \(ReportFormat.grouped(Double(bin.count))) (\(ReportFormat.digits(pct)) %)</title></rect>"
        }
        var legend = ""
        for (i, marker) in markers.enumerated() {
            let at = coordinate(x(marker.1))
            svg += "<line class=\"marker m\(i)\" x1=\"\(at)\" x2=\"\(at)\" y1=\"\(b.top)\" y2=\"\(b.top + b.height)\"/>"
            legend += "<li><i class=\"m\(i)\"></i>\(marker.0) <span>\(unit.format(marker.1))</span></li>"
        }
        svg += "</svg>"
        return figure(title: title, legend: legend, svg: svg, note: note)
    }

    /// Horizontal bars, two per row (p50 and p99): the steps of a dial.
    static func steps(id: String, title: String, rows: [(label: String, p50: Double, p99: Double)], note: String?) -> String {
        let rowHeight = 38.0
        let left = 96.0
        let right = width - 90
        let h = Double(rows.count) * rowHeight + 30
        let scale = Axis.linear(rows.map(\.p99))
        func x(_ v: Double) -> Double { left + v / scale.high * (right - left) }
        var svg = "<svg class=\"chart bars\" id=\"\(id)\" viewBox=\"0 0 \(Int(width)) \(Int(h))\" role=\"img\" aria-label=\"\(ReportFormat.html(title))\">"
        for tick in scale.ticks {
            let at = coordinate(x(tick))
            svg += "<line class=\"grid\" x1=\"\(at)\" x2=\"\(at)\" y1=\"4\" y2=\"\(h - 22)\"/>"
            svg += "<text class=\"tick x\" x=\"\(at)\" y=\"\(h - 6)\">\(ReportFormat.tick(ReportUnit.seconds.format(tick)))</text>"
        }
        for (i, row) in rows.enumerated() {
            let y = 8 + Double(i) * rowHeight
            svg += "<text class=\"tick y\" x=\"\(left - 8)\" y=\"\(coordinate(y + 16))\">\(ReportFormat.html(row.label))</text>"
            for (j, (name, v)) in [("p50", row.p50), ("p99", row.p99)].enumerated() {
                let top = y + Double(j) * 15
                svg += "<rect class=\"bar s\(j)\" x=\"\(left)\" y=\"\(coordinate(top))\" width=\"\(coordinate(max(0.5, x(v) - left)))\" height=\"12\"><title>\(ReportFormat.html(row.label)) \(name): \(ReportUnit.seconds.format(v))</title></rect>"
                svg += "<text class=\"value\" x=\"\(coordinate(x(v) + 4))\" y=\"\(coordinate(top + 6.5))\">\(ReportUnit.seconds.format(v))</text>"
            }
        }
        svg += "</svg>"
        let legend = "<li><i class=\"s0\"></i>p50</li><li><i class=\"s1\"></i>p99</li>"
        return figure(title: title, legend: legend, svg: svg, note: note)
    }

    private static func open(id: String, kind: String, extra: String) -> String {
        let b = box
        return "<svg class=\"chart \(kind)\" id=\"\(id)\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" data-box=\"\(b.left) \(b.top) \(b.width) \(b.height)\" \(extra)>"
    }

    private static func figure(title: String, legend: String, svg: String, note: String?) -> String {
        var out = "<figure class=\"panel\"><figcaption>\(ReportFormat.html(title))</figcaption><ul class=\"legend\">\(legend)</ul>\(svg)"
        if let note { out += "<p class=\"chart-note\">\(ReportFormat.html(note))</p>" }
        return out + "</figure>\n"
    }

    private static func grid(_ axis: Axis, unit: ReportUnit, suffix: String = "") -> String {
        let b = box
        var out = ""
        for tick in axis.ticks {
            let y = coordinate(axis.y(tick))
            out += "<line class=\"grid\" x1=\"\(b.left)\" x2=\"\(b.left + b.width)\" y1=\"\(y)\" y2=\"\(y)\"/>"
            let label = ReportFormat.tick(unit == .plain ? ReportFormat.short(tick) : unit.format(tick))
            out += "<text class=\"tick y\" x=\"\(b.left - 6)\" y=\"\(y)\">\(label)\(suffix)</text>"
        }
        return out + "<line class=\"axis\" x1=\"\(b.left)\" x2=\"\(b.left + b.width)\" y1=\"\(b.top + b.height)\" y2=\"\(b.top + b.height)\"/>"
    }

    private static func timeTicks(end: Double, x: (Double) -> Double) -> String {
        let steps: [Double] = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400]
        let step = steps.first { end / $0 <= 8 } ?? 86400
        var out = ""
        for t in stride(from: 0, through: end, by: step) {
            out += "<text class=\"tick x\" x=\"\(coordinate(x(t)))\" y=\"\(box.top + box.height + 16)\">\(ReportFormat.tick(ReportFormat.clock(t)))</text>"
        }
        return out
    }

    struct Point {
        var t: Double
        var v: Double
        var index: Int
    }

    /// At most a lowest and a highest point per column, in time order.
    static func decimate(_ points: [Point], columns: Int) -> [Point] {
        guard points.count > 2 * columns, let end = points.last?.t, end > 0 else { return points }
        func column(_ p: Point) -> Int { Int(p.t / end * Double(columns - 1)) }
        var out: [Point] = []
        var i = 0
        while i < points.count {
            let here = column(points[i])
            var low = i
            var high = i
            var j = i
            while j < points.count, column(points[j]) == here {
                if points[j].v < points[low].v { low = j }
                if points[j].v > points[high].v { high = j }
                j += 1
            }
            out.append(points[min(low, high)])
            if low != high { out.append(points[max(low, high)]) }
            i = j
        }
        return out
    }

    /// Two decimals: report.js reads values back from them, to 0.05 % on a log axis of 3 decades.
    static func coordinate(_ v: Double) -> String { String(format: "%.2f", v) }

    /// A value axis: where a value goes in the plot, and the ticks to label.
    struct Axis {
        let low: Double
        let high: Double
        let log: Bool
        let ticks: [Double]

        func y(_ v: Double) -> Double {
            let b = ReportChart.box
            let f = log ? (log10(max(v, low)) - log10(low)) / (log10(high) - log10(low)) : (v - low) / (high - low)
            return b.top + b.height * (1 - min(max(f, 0), 1))
        }

        var attributes: String { "data-low=\"\(low)\" data-high=\"\(high)\" data-log=\"\(log)\"" }

        /// From 0 to a round number above the highest value, 4 or 5 ticks;
        /// for bytes, round in the KiB or MiB the ticks are written in.
        static func linear(_ values: [Double], unit: ReportUnit = .plain) -> Axis {
            let top = values.max() ?? 0
            guard top > 0 else { return Axis(low: 0, high: 1, log: false, ticks: [0, 1]) }
            let base: Double = unit == .bytes ? pow(1024, floor(log10(max(top, 1)) / log10(1024))) : 1
            let raw = top / base / 4
            let magnitude = pow(10, floor(log10(raw)))
            let step = [1.0, 2, 2.5, 5, 10].map { $0 * magnitude }.first { $0 >= raw } ?? 10 * magnitude
            let high = ceil(top / base / step - 1e-9) * step
            return Axis(low: 0, high: high * base, log: false, ticks: stride(from: 0, through: high + step / 2, by: step).map { $0 * base })
        }

        /// Whole decades around the positive values.
        static func logarithmic(_ values: [Double]) -> Axis {
            let positive = values.filter { $0 > 0 }
            guard let least = positive.min(), let most = positive.max() else { return Axis(low: 1e-3, high: 1, log: true, ticks: [1e-3, 1e-2, 1e-1, 1]) }
            let low = pow(10, floor(log10(least)))
            var high = pow(10, ceil(log10(most)))
            if high <= low { high = low * 10 }
            let decades = Int((log10(high) - log10(low)).rounded())
            return Axis(low: low, high: high, log: true, ticks: (0...decades).map { low * pow(10, Double($0)) })
        }
    }
}
