import ArgumentParser
import Foundation
import MoonwireCore
import MoonwireLua

struct Metrics: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Work with the metrics files of measured runs.",
        subcommands: [Merge.self]
    )

    struct Merge: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Merge summary files (run --summary-json) into one, exactly.",
            discussion: """
                Counters and gauges add up, histograms merge bucket by bucket (HdrHistogram), \
                so the percentiles of the result are those of all the runs' values together. \
                Prints the summary table; -o writes the merged file; --threshold checks it \
                (exit 99 when one fails).
                """
        )

        @Argument(help: "Summary files written by run --summary-json.")
        var files: [String]

        @Option(name: .shortAndLong, help: ArgumentHelp("Write the merged summary to FILE.", valueName: "FILE"))
        var output: String?

        @Option(name: .customLong("threshold"), help: ArgumentHelp("A condition to check on the merged metrics, such as 'request_latency:p99 < 0.05'. Repeatable.", valueName: "EXPR"))
        var thresholdExpressions: [String] = []

        func validate() throws {
            guard !files.isEmpty else { throw ValidationError("give one or more summary files (run --summary-json FILE)") }
            try MetricsOptions.checkThresholds(thresholdExpressions)
        }

        func run() throws {
            var parts: [MetricsSnapshot] = []
            for path in files {
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw ValidationError("cannot read '\(path)'")
                }
                do {
                    parts.append(try MetricsSnapshot.decode(data, from: path))
                } catch {
                    throw ValidationError(error.description)
                }
            }
            let merged: MetricsSnapshot
            do {
                merged = try MetricsSnapshot.merge(parts)
            } catch {
                throw ValidationError(error.description)
            }
            if let output, !FileManager.default.createFile(atPath: output, contents: merged.encoded()) {
                throw ValidationError("-o: cannot write '\(output)'")
            }
            var options = try MetricsOptions.parse(["--summary"] + thresholdExpressions.flatMap { ["--threshold", $0] })
            options.summaryJSON = nil
            let code = options.finish(merged, scriptThresholds: [], scriptCode: 0) { ScriptRuntime.writeToStderr("moonwire: " + $0) }
            if code != 0 { throw ExitCode(code) }
        }
    }
}
