import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A swift-log handler that writes one line per event to stderr, as text or JSON.
///
/// ```swift
/// let log = Logger(label: "moonwire") { _ in MoonwireLogHandler(level: .info, format: .text) }
/// log.info("connected", metadata: ["conn": "ws://127.0.0.1:9000/"])
/// ```
public struct MoonwireLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public let format: LogFormat
    public let colors: Bool

    /// Colors default to on only when stderr is a terminal.
    public init(level: Logger.Level, format: LogFormat, colors: Bool = isatty(2) != 0) {
        self.logLevel = level
        self.format = format
        self.colors = colors && format == .text
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let pairs = merged.sorted { $0.key < $1.key }.map { ($0.key, "\($0.value)") }
        let line = LogLine.render(
            level: event.level.rawValue, message: "\(event.message)", metadata: pairs, format: format, colors: colors
        ) + "\n"
        // One write per line keeps lines from concurrent loops whole.
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }
}
