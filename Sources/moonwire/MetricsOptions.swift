import ArgumentParser
import Foundation
import MoonwireCore
import MoonwireLua
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// `run`'s options for measured runs: the summary, its file, thresholds,
/// shards and the live outputs.
struct MetricsOptions: ParsableArguments {
    @Flag(help: "At the end, print a table of every metric: count, rate, min, p50, p90, p99, p99.9, max.")
    var summary = false

    @Option(name: .customLong("summary-json"), help: ArgumentHelp("At the end, write the metrics with their encoded histograms to FILE (for 'moonwire metrics merge'); to a directory, as shard-I-of-N.json (summary.json unsplit).", valueName: "FILE"))
    var summaryJSON: String?

    @Option(name: .customLong("threshold"), help: ArgumentHelp("A condition checked at the end, such as 'request_latency:p99 < 0.05'; exit 99 when one fails. Repeatable.", valueName: "EXPR"))
    var thresholdExpressions: [String] = []

    @Option(help: ArgumentHelp("Run shard I of N (1 <= I <= N): this process's part of mw.rate and mw.vus. Default: $MW_SHARD, or the engine's: Kubernetes' $JOB_COMPLETION_INDEX + 1 of $MW_SHARDS, Slurm's array task or srun task.", valueName: "I/N"))
    var shard: String?

    @Option(name: .customLong("start-at"), help: ArgumentHelp("Begin mw.rate and mw.vus at TIME, wall clock, so that shards started apart load together: RFC 3339 (2026-11-26T22:00:00Z), epoch seconds (date +%s) or +5s. The duration counts from it. Default: $MW_START_AT.", valueName: "TIME"))
    var startAt: String?

    @Option(name: .customLong("metrics-jsonl"), help: ArgumentHelp("Append a snapshot of the metrics to FILE every second, one JSON object a line.", valueName: "FILE"))
    var metricsJSONL: String?

    @Option(help: ArgumentHelp("At the end, write an HTML report of the run to FILE: charts over time, latency distributions, the summary and thresholds; one file that opens offline.", valueName: "FILE"))
    var report: String?

    @Option(name: .customLong("metrics-port"), help: ArgumentHelp("Serve the metrics in Prometheus text format on http://127.0.0.1:PORT/metrics during the run (0: any free port, printed on stderr).", valueName: "PORT"))
    var metricsPort: Int?

    @Option(name: .customLong("metrics-host"), help: ArgumentHelp("The address --metrics-port listens on.", valueName: "ADDRESS"))
    var metricsHost = "127.0.0.1"

    /// The JSON-lines file of the run: --metrics-jsonl, else, for --report
    /// alone, one in the temporary folder that the report reads at the end.
    var timelinePath: String? {
        metricsJSONL ?? report.map { _ in FileManager.default.temporaryDirectory.appendingPathComponent("moonwire-report-\(getpid()).jsonl").path }
    }

    var thresholds: [Threshold] {
        thresholdExpressions.compactMap { try? Threshold(expression: $0) }
    }

    /// Every --threshold expression parses, else a usage error naming the bad one.
    static func checkThresholds(_ expressions: [String]) throws {
        for expression in expressions {
            do {
                _ = try Threshold(expression: expression)
            } catch {
                throw ValidationError("--threshold: \(error.description)")
            }
        }
    }

    func validate() throws {
        try Self.checkThresholds(thresholdExpressions)
        if let port = metricsPort, !(0...65535).contains(port) {
            throw ValidationError("--metrics-port must be 0 to 65535")
        }
    }

    /// --shard, else the engine's variables (Shard.resolve, docs/scaling.md).
    func resolvedShard(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Shard? {
        do {
            return try Shard.resolve(option: shard, environment: environment)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// --start-at, else MW_START_AT: seconds since 1970.
    func resolvedStartAt(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Double? {
        guard let text = startAt ?? environment["MW_START_AT"] else { return nil }
        do {
            return try StartAt.parse(text, now: Date().timeIntervalSince1970)
        } catch {
            throw ValidationError("\(startAt != nil ? "--start-at" : "MW_START_AT"): \(error.description)")
        }
    }

    /// The status line: on a terminal, in a measured run (one asking for a
    /// summary, thresholds or live metrics), so a bot's own output is left alone.
    var showsStatus: Bool {
        isatty(2) != 0 && (summary || summaryJSON != nil || !thresholdExpressions.isEmpty || metricsJSONL != nil || metricsPort != nil || report != nil)
    }

    /// Whether anything reads the metrics during the run.
    var live: Bool { timelinePath != nil || metricsPort != nil || showsStatus }

    /// The summary, thresholds and file at the end; returns the exit code:
    /// the script's when it failed, else 2 for a threshold on a metric the run
    /// never had, else 99 when a threshold failed, else 0. A shard (`deferred`)
    /// checks none: its file keeps them, and `metrics merge` checks them on the whole.
    func finish(_ snapshot: MetricsSnapshot, scriptThresholds: [Threshold], scriptCode: Int32, deferred: Bool = false, reportError: (String) -> Void) -> Int32 {
        let all = Threshold.unique(thresholds + scriptThresholds)
        var snapshot = snapshot
        snapshot.thresholds = all.isEmpty ? nil : all.map(\.expression)
        if let given = summaryJSON {
            let path = Self.summaryFile(given, shard: snapshot.shards.first)
            if !FileManager.default.createFile(atPath: path, contents: snapshot.encoded()) {
                reportError("--summary-json: cannot write '\(path)'")
                return scriptCode != 0 ? scriptCode : 1
            }
        }
        var out = ""
        if summary { out += snapshot.table() }
        if deferred {
            if !all.isEmpty { out += "thresholds: \(all.count), checked on the whole run by moonwire metrics merge\n" }
            if !out.isEmpty {
                fputs(out, stdout)
                fflush(stdout)
            }
            return scriptCode
        }
        let (lines, passed, unknown) = Threshold.report(all, against: snapshot)
        if !all.isEmpty { out += "thresholds:\n" + lines.map { "  " + $0 + "\n" }.joined() }
        if !out.isEmpty {
            fputs(out, stdout)
            fflush(stdout)
        }
        for t in unknown {
            let known = Array(Set(snapshot.metrics.map(\.name))).sorted().joined(separator: ", ")
            reportError("threshold '\(t)': no metric '\(t.metric)' in this run (metrics: \(known))")
        }
        if scriptCode != 0 { return scriptCode }
        if !unknown.isEmpty { return 2 }
        return passed ? 0 : 99
    }

    /// --summary-json's file: the path given, or, for a directory (one that exists,
    /// or a path ending in /, made then), the shard's file in it
    /// (`shard-I-of-N.json`, `summary.json` for a run not split).
    static func summaryFile(_ given: String, shard: Shard?) -> String {
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: given, isDirectory: &isDirectory)
        guard given.hasSuffix("/") || (exists && isDirectory.boolValue) else { return given }
        try? FileManager.default.createDirectory(atPath: given, withIntermediateDirectories: true)
        return (given.hasSuffix("/") ? given : given + "/") + MetricsSnapshot.fileName(shard: shard)
    }

    /// --report: the page from the run's JSON-lines file and its final
    /// snapshot (none when the script did not start: no page); the file is
    /// removed when only the report asked for it. Returns what went wrong.
    func writeReport(_ snapshot: MetricsSnapshot?, thresholds: [Threshold]) -> String? {
        guard let report, let path = timelinePath else { return nil }
        defer { if metricsJSONL == nil { try? FileManager.default.removeItem(atPath: path) } }
        guard let snapshot else { return nil }
        var page = ReportPage(timelines: [], summary: snapshot, thresholds: thresholds)
        do {
            page.timelines = [try MetricsTimeline.read(path, named: metricsJSONL ?? "the run's metrics")]
        } catch {
            page.notes.append(error.description)
        }
        guard FileManager.default.createFile(atPath: report, contents: Data(page.html().utf8)) else {
            return "--report: cannot write '\(report)'"
        }
        return nil
    }
}
