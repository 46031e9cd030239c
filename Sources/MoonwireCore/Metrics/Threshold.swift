import Foundation

/// A pass/fail condition on one statistic of one metric, checked at the end of
/// a run: `request_latency:p99 < 0.05`, `dropped:count == 0`. Times are in
/// seconds. A metric with tags is checked over all its tags together.
public struct Threshold: Sendable, Equatable, CustomStringConvertible {
    public enum Comparison: String, Sendable, CaseIterable {
        case lessOrEqual = "<=", greaterOrEqual = ">=", equal = "==", notEqual = "!=", less = "<", greater = ">"

        public func holds(_ a: Double, _ b: Double) -> Bool {
            switch self {
            case .less: a < b
            case .lessOrEqual: a <= b
            case .greater: a > b
            case .greaterOrEqual: a >= b
            case .equal: a == b
            case .notEqual: a != b
            }
        }
    }

    public struct ParseError: Error, CustomStringConvertible, Equatable {
        public let description: String
    }

    public let metric: String
    public let statistic: String
    public let comparison: Comparison
    public let bound: Double

    public var description: String { "\(metric):\(statistic) \(comparison.rawValue) \(String(format: "%g", bound))" }

    /// As `init(expression:)` reads it back, the bound exactly: how summary files keep it.
    public var expression: String { "\(metric):\(statistic) \(comparison.rawValue) \(bound)" }

    /// `metric:statistic` and a condition such as `< 0.05`.
    public init(key: String, condition: String) throws(ParseError) {
        let parts = key.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count >= 2 else {
            throw ParseError(description: "threshold '\(key)': write metric:statistic, such as request_latency:p99")
        }
        let stat = String(parts.last!)
        let name = parts.dropLast().joined(separator: ":")
        guard MetricKey.isValidName(name) else {
            throw ParseError(description: "threshold '\(key)': '\(name)' is not a metric name")
        }
        guard MetricStatistics.isStatisticName(stat) else {
            throw ParseError(description: "threshold '\(key)': unknown statistic '\(stat)' (use \(MetricStatistics.statisticNames))")
        }
        let text = condition.trimmingCharacters(in: .whitespaces)
        guard let op = Comparison.allCases.first(where: { text.hasPrefix($0.rawValue) }) else {
            throw ParseError(description: "threshold '\(key)': condition '\(condition)' must start with <, <=, >, >=, == or !=")
        }
        let number = text.dropFirst(op.rawValue.count).trimmingCharacters(in: .whitespaces)
        guard let bound = Double(number), bound.isFinite else {
            throw ParseError(description: "threshold '\(key)': '\(number)' in '\(condition)' is not a number")
        }
        metric = name
        statistic = stat
        comparison = op
        self.bound = bound
    }

    /// One expression as `--threshold` takes it: `request_latency:p99<0.05`.
    public init(expression: String) throws(ParseError) {
        let text = expression.trimmingCharacters(in: .whitespaces)
        guard let at = text.firstIndex(where: { "<>=!".contains($0) }) else {
            throw ParseError(description: "threshold '\(expression)': write metric:statistic, a comparison and a number, such as 'request_latency:p99 < 0.05'")
        }
        try self.init(key: text[..<at].trimmingCharacters(in: .whitespaces), condition: String(text[at...]))
    }

    public enum Outcome: Equatable, Sendable {
        case pass(Double)
        case fail(Double)
        /// The metric was never registered in the run: a mistake in the threshold.
        case unknownMetric
        /// The metric exists but has no such value (a percentile of no samples).
        case noData
    }

    /// Checks against `snapshot`, all tags of the metric together.
    public func check(_ snapshot: MetricsSnapshot) -> Outcome {
        let same = snapshot.metrics.filter { $0.name == metric }.map { m -> MetricsSnapshot.Metric in
            var m = m
            m.tags = [:]
            return m
        }
        guard !same.isEmpty else { return .unknownMetric }
        guard let combined = try? MetricsSnapshot.merge([MetricsSnapshot(duration: snapshot.duration, shards: [], metrics: same)]).metrics.first,
            let actual = MetricStatistics(combined, duration: snapshot.duration).statistic(statistic)
        else { return .noData }
        return comparison.holds(actual, bound) ? .pass(actual) : .fail(actual)
    }
}

extension Threshold {
    /// Each threshold once, in the order first given.
    public static func unique(_ list: [Threshold]) -> [Threshold] {
        list.reduce(into: []) { all, t in if !all.contains(t) { all.append(t) } }
    }

    /// The report lines and whether every threshold held; `unknown` lists the
    /// thresholds naming a metric the run never had.
    public static func report(_ thresholds: [Threshold], against snapshot: MetricsSnapshot) -> (lines: [String], passed: Bool, unknown: [Threshold]) {
        var lines: [String] = []
        var passed = true
        var unknown: [Threshold] = []
        for t in thresholds {
            switch t.check(snapshot) {
            case .pass(let v): lines.append("pass  \(t)  (\(String(format: "%g", v)))")
            case .fail(let v):
                passed = false
                lines.append("FAIL  \(t)  (\(String(format: "%g", v)))")
            case .noData:
                passed = false
                lines.append("FAIL  \(t)  (no data)")
            case .unknownMetric:
                unknown.append(t)
            }
        }
        return (lines, passed, unknown)
    }
}
