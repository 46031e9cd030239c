import ArgumentParser
import Foundation
import Histogram
import MoonwireCore
import MoonwireLua
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

extension ScriptRuntime.Options {
    /// The part of mw.rate and mw.vus this worker runs: shard I of N split
    /// again among the workers, so that N processes of W workers together run
    /// exactly the schedule one process would.
    func sliced(shard: Shard?, worker: Int, workers: Int) -> Self {
        guard shard != nil || workers > 1 else { return self }
        let process = shard ?? Shard(index: 1, count: 1)
        return .init(self, shard: Shard(index: (process.index - 1) * workers + worker, count: process.count * workers))
    }
}

/// What reads the metrics while the run goes on: the JSON-lines file, the
/// Prometheus endpoint and the status line on a terminal. Each asks every
/// runtime for a snapshot on its own loop, and merges them.
final class LiveMetrics: @unchecked Sendable {
    private let runtimes: [ScriptRuntime]
    private let loop: EventLoop
    private var task: RepeatedTask?
    private var jsonl: UnsafeMutablePointer<FILE>?
    private var server: Channel?
    private let status: Bool
    private var lastMessages = 0.0
    private var lastTime = 0.0

    /// Merges the snapshots of every runtime (run --workers) into one.
    static func gather(_ runtimes: [ScriptRuntime]) -> EventLoopFuture<MetricsSnapshot> {
        let futures = runtimes.map { rt in rt.eventLoop.submit { rt.metricsSnapshot() } }
        return EventLoopFuture.whenAllSucceed(futures, on: runtimes[0].eventLoop).map { parts in
            guard parts.count > 1, var merged = try? MetricsSnapshot.merge(parts) else { return parts[0] }
            merged.shards = parts[0].shards
            // One process, one start: its earliest worker's.
            merged.starts = parts.flatMap { $0.starts ?? [] }.min { $0.at < $1.at }.map { [$0] }
            return merged
        }
    }

    private init(runtimes: [ScriptRuntime], loop: EventLoop, status: Bool) {
        self.runtimes = runtimes
        self.loop = loop
        self.status = status
    }

    /// Nil when nothing reads metrics during the run. A file that cannot be
    /// written or a port that cannot be bound is a usage error (exit 2).
    static func start(_ options: MetricsOptions, runtimes: [ScriptRuntime], group: EventLoopGroup, reportError: @escaping (String) -> Void) throws -> LiveMetrics? {
        guard options.live else { return nil }
        let live = LiveMetrics(runtimes: runtimes, loop: group.next(), status: options.showsStatus)
        if let path = options.timelinePath {
            guard let file = fopen(path, "w") else {
                let flag = options.metricsJSONL != nil ? "--metrics-jsonl" : "--report"
                throw ValidationError("\(flag): cannot write '\(path)': \(String(cString: strerror(errno)))")
            }
            live.jsonl = file
        }
        if let port = options.metricsPort {
            do {
                live.server = try PrometheusEndpoint.bind(host: options.metricsHost, port: port, group: group) { gather(runtimes) }
            } catch {
                throw ValidationError("--metrics-port \(port): cannot listen on \(options.metricsHost):\(port): \(error)")
            }
            if port == 0, let bound = live.server?.localAddress?.port {
                ScriptRuntime.writeToStderr("moonwire: metrics on http://\(options.metricsHost):\(bound)/metrics")
            }
        }
        // The endpoint takes its own snapshot per scrape: ticks only for the file and the status line.
        guard live.jsonl != nil || live.status else { return live }
        live.task = live.loop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { [live] _ in
            live.tick()
        }
        return live
    }

    /// The latest tick's work: stop() waits for it before closing the file.
    private var pending: EventLoopFuture<Void>?

    private func tick() {
        pending = Self.gather(runtimes).map { [self] snapshot in
            if let jsonl { writeLine(snapshot, to: jsonl) }
            if status { showStatus(snapshot) }
        }
    }

    /// Each histogram's bucket counts at the previous line, by display name:
    /// what the next line's interval figures subtract.
    private var previousCounts: [String: [UInt64: UInt64]] = [:]
    private var linesWritten = 0

    /// One line: the time and, per metric, its count (or value); for
    /// histograms p50, p90, p99 and max since the start and the same figures
    /// of the values recorded since the previous line (`interval_count`,
    /// `interval_p50`, ...), in seconds. The first line also has the command
    /// line and the wall-clock `start` of t = 0; the line written at the end of
    /// the run has `end` and the run's `thresholds`.
    private func writeLine(_ snapshot: MetricsSnapshot, to file: UnsafeMutablePointer<FILE>, extra: [String: Any] = [:]) {
        var metrics: [String: [String: Double]] = [:]
        let encoded = Dictionary(snapshot.metrics.map { ($0.key.display, $0.histogram) }) { first, _ in first }
        for s in snapshot.statistics() {
            let name = s.key.display
            var entry: [String: Double] = ["count": s.count]
            if s.kind == .histogram {
                for (label, p) in Self.percentiles { entry[label] = s.percentile(p) }
                entry["max"] = s.max
                if let histogram = encoded[name] ?? nil {
                    let (interval, counts) = histogram.since(previousCounts[name] ?? [:])
                    previousCounts[name] = counts
                    entry["interval_count"] = Double(interval.totalCount)
                    if interval.totalCount > 0 {
                        let scale = MetricsRegistry.histogramScale
                        for (label, p) in Self.percentiles { entry["interval_" + label] = Double(interval.valueAtPercentile(p)) / scale }
                        entry["interval_max"] = Double(interval.max) / scale
                    }
                }
            } else if let max = s.max {
                entry["max"] = max
            }
            metrics[name] = entry
        }
        var line: [String: Any] = ["t": (snapshot.duration * 1000).rounded() / 1000, "metrics": metrics]
        if let shard = snapshot.shards.first { line["shard"] = shard.description }
        if linesWritten == 0 {
            line["command"] = [URL(fileURLWithPath: CommandLine.arguments[0]).lastPathComponent] + CommandLine.arguments.dropFirst()
            line["start"] = ISO8601DateFormatter().string(from: Date(timeIntervalSinceNow: -snapshot.duration))
        }
        line.merge(extra) { $1 }
        guard var data = try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys]) else { return }
        data.append(0x0A)
        data.withUnsafeBytes { _ = fwrite($0.baseAddress, 1, $0.count, file) }
        fflush(file)
        linesWritten += 1
    }

    private static let percentiles = [("p50", 50.0), ("p90", 90), ("p99", 99)]

    private func showStatus(_ snapshot: MetricsSnapshot) {
        func total(_ name: String) -> Double {
            snapshot.metrics.filter { $0.name == name }.reduce(0) { $0 + ($1.value ?? 0) }
        }
        let messages = total("messages_in") + total("messages_out")
        let rate = snapshot.duration > lastTime ? (messages - lastMessages) / (snapshot.duration - lastTime) : 0
        lastMessages = messages
        lastTime = snapshot.duration
        let latency = snapshot.statistics().first { $0.key.name == "iteration_duration" && $0.count > 0 }
            ?? snapshot.statistics().first { $0.key.name == "request_latency" }
        let p99 = latency?.percentile(99).map(MetricsSnapshot.seconds) ?? "-"
        let line = "\r\u{1B}[2K\(Int(snapshot.duration))s  open \(Int(total("connections_open")))  msgs/s \(Int(rate))"
            + "  p99 \(p99)  errors \(Int(total("errors")))"
        fputs(line, stderr)
    }

    /// Ends the ticks (waiting for one under way); the file stays open for `close`.
    func stop() {
        let done = loop.makePromise(of: Void.self)
        task?.cancel(promise: done)
        if task == nil { done.succeed() }
        try? done.futureResult.wait()
        try? pending?.wait()
        if status { fputs("\r\u{1B}[2K", stderr) }
    }

    /// The last line (the run's final figures, `end` and its thresholds), then
    /// closes the file and the endpoint.
    func close(final snapshot: MetricsSnapshot?, thresholds: [Threshold]) {
        if let jsonl, let snapshot {
            writeLine(snapshot, to: jsonl, extra: ["end": true, "thresholds": thresholds.map(\.description)])
        }
        if let jsonl { fclose(jsonl) }
        jsonl = nil
        try? server?.close().wait()
    }
}

extension EncodedHistogram {
    /// The values recorded since `before` (bucket counts of an earlier
    /// encoding of the same histogram), and this encoding's counts.
    func since(_ before: [UInt64: UInt64]) -> (Histogram<UInt64>, [UInt64: UInt64]) {
        var now: [UInt64: UInt64] = [:]
        var added = self
        added.counts = counts.compactMap { pair in
            guard pair.count == 2 else { return nil }
            now[pair[0]] = pair[1]
            let fresh = pair[1] - Swift.min(pair[1], before[pair[0]] ?? 0)
            return fresh > 0 ? [pair[0], fresh] : nil
        }
        return (added.decode(), now)
    }
}
