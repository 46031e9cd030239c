import ArgumentParser
import Foundation
import MoonwireCore

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an HTML report of a measured run: charts over time, distributions, the summary and thresholds.",
        discussion: """
            Give the run's --metrics-jsonl file (one per shard) and, for the latency \
            distributions, the exact table and thresholds, its --summary-json files; \
            each file is recognised by its content, and shards make one report. The \
            report is one HTML file that opens offline. A metrics file cut short (a \
            killed run) gives a report up to its last full line, with a note.
            """
    )

    @Argument(help: "Files of a run: run --metrics-jsonl (one per shard) and run --summary-json.")
    var files: [String]

    @Option(name: .shortAndLong, help: ArgumentHelp("The HTML file to write.", valueName: "FILE"))
    var output: String

    @Option(name: .customLong("threshold"), help: ArgumentHelp("A condition to show checked, such as 'request_latency:p99 < 0.05', besides those the run checked. Repeatable.", valueName: "EXPR"))
    var thresholdExpressions: [String] = []

    func validate() throws {
        guard !files.isEmpty else { throw ValidationError("give the run's --metrics-jsonl file (and its --summary-json files)") }
        try MetricsOptions.checkThresholds(thresholdExpressions)
    }

    func run() throws {
        var timelines: [MetricsTimeline] = []
        var summaries: [MetricsSnapshot] = []
        for path in files {
            do {
                switch try ReportInput.read(path) {
                case .timeline(let timeline): timelines.append(timeline)
                case .summary(let summary): summaries.append(summary)
                }
            } catch {
                throw ValidationError(error.description)
            }
        }
        let summary: MetricsSnapshot?
        do {
            summary = summaries.isEmpty ? nil : try MetricsSnapshot.merge(summaries)
        } catch {
            throw ValidationError(error.description)
        }
        // The run's own thresholds (its last line), each once, then --threshold's.
        var expressions: [String] = []
        for e in timelines.flatMap(\.thresholds) + thresholdExpressions where !expressions.contains(e) { expressions.append(e) }
        var page = ReportPage(timelines: timelines, summary: summary, thresholds: expressions.compactMap { try? Threshold(expression: $0) })
        if timelines.isEmpty { page.notes.append("No metrics file (run --metrics-jsonl) was given: nothing over time.") }
        if !FileManager.default.createFile(atPath: output, contents: Data(page.html().utf8)) {
            throw ValidationError("-o: cannot write '\(output)'")
        }
    }
}
