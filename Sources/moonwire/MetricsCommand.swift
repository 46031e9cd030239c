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

        @Argument(help: "Summary files written by run --summary-json, or directories of shard files (shard-I-of-N.json: every shard once, none missing).")
        var files: [String]

        @Option(name: .shortAndLong, help: ArgumentHelp("Write the merged summary to FILE.", valueName: "FILE"))
        var output: String?

        @Option(name: .customLong("threshold"), help: ArgumentHelp("A condition to check on the merged metrics, such as 'request_latency:p99 < 0.05', besides those the files hold (the runs' --threshold and mw.thresholds). Repeatable.", valueName: "EXPR"))
        var thresholdExpressions: [String] = []

        func validate() throws {
            guard !files.isEmpty else { throw ValidationError("give one or more summary files (run --summary-json FILE)") }
            try MetricsOptions.checkThresholds(thresholdExpressions)
        }

        func run() throws {
            var parts: [MetricsSnapshot] = []
            do {
                for path in files {
                    var isDirectory: ObjCBool = false
                    if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                        let names = try FileManager.default.contentsOfDirectory(atPath: path).filter(MetricsSnapshot.isShardFileName).sorted()
                        let shards = try names.map { try Self.read((path as NSString).appendingPathComponent($0)) }
                        try MetricsSnapshot.checkWhole(shards, in: path)
                        parts += shards
                    } else {
                        parts.append(try Self.read(path))
                    }
                }
            } catch let error as MetricsSnapshot.MergeError {
                throw ValidationError(error.description)
            }
            var merged: MetricsSnapshot
            do {
                merged = try MetricsSnapshot.merge(parts)
            } catch {
                throw ValidationError(error.description)
            }
            // The files' thresholds (each run's) and this command's, once each.
            var fromFiles: [Threshold] = []
            for expression in merged.thresholds ?? [] {
                guard let t = try? Threshold(expression: expression) else { throw ValidationError("a summary file holds the threshold '\(expression)', which does not parse") }
                fromFiles.append(t)
            }
            var options = try MetricsOptions.parse(["--summary"] + thresholdExpressions.flatMap { ["--threshold", $0] })
            options.summaryJSON = nil
            let all = Threshold.unique(options.thresholds + fromFiles)
            merged.thresholds = all.isEmpty ? nil : all.map(\.expression)
            if let output, !FileManager.default.createFile(atPath: output, contents: merged.encoded()) {
                throw ValidationError("-o: cannot write '\(output)'")
            }
            let code = options.finish(merged, scriptThresholds: fromFiles, scriptCode: 0) { ScriptRuntime.writeToStderr("moonwire: " + $0) }
            if code != 0 { throw ExitCode(code) }
        }

        static func read(_ path: String) throws -> MetricsSnapshot {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("cannot read '\(path)'")
            }
            return try MetricsSnapshot.decode(data, from: path)
        }
    }
}
