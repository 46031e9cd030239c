import ArgumentParser
import Logging
import MoonwireCore
import MoonwireLua
import Foundation

/// Flags every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: "Log more: -v for debug, -vv for trace.")
    var verbose: Int

    @Flag(name: .shortAndLong, help: "Log less: -q for warnings and errors only, -qq for errors only.")
    var quiet: Int

    @Option(name: .long, help: "How log lines on stderr look: text for people, json for machines.")
    var logFormat: LogFormat = .text

    var logLevel: Logger.Level {
        switch verbose - quiet {
        case 2...: return .trace
        case 1: return .debug
        case 0: return .info
        case -1: return .warning
        default: return .error
        }
    }

    /// `worker` (of `run --workers`, when there is more than one) goes on every line as `worker=N`.
    func makeLogger(worker: Int? = nil) -> Logger {
        var logger = Logger(label: "moonwire") { [logLevel, logFormat] _ in MoonwireLogHandler(level: logLevel, format: logFormat) }
        if let worker { logger[metadataKey: "worker"] = "\(worker)" }
        return logger
    }

    /// Writes an uncaught script error: as it is in text mode (after `worker N: `
    /// when there is a worker to name), as one JSON line otherwise.
    func reportError(_ message: String, worker: Int? = nil) {
        switch logFormat {
        case .text:
            ScriptRuntime.writeToStderr(worker.map { "worker \($0): " + message } ?? message)
        case .json:
            let parts = message.components(separatedBy: "\nstack traceback:\n")
            var metadata: [(String, String)] = []
            if parts.count > 1 { metadata.append(("traceback", parts.dropFirst().joined(separator: "\n"))) }
            if let worker { metadata.append(("worker", "\(worker)")) }
            ScriptRuntime.writeToStderr(
                LogLine.render(level: "error", message: parts[0], metadata: metadata, format: .json, colors: false)
            )
        }
    }
}

extension LogFormat: ExpressibleByArgument {}
