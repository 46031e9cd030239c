import ArgumentParser
import Foundation
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
        if let path = options.metricsJSONL {
            guard let file = fopen(path, "w") else {
                throw ValidationError("--metrics-jsonl: cannot write '\(path)': \(String(cString: strerror(errno)))")
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

    /// One line: the time and, per metric, its count (or value) and for
    /// histograms p50, p90, p99 and max, in seconds.
    private func writeLine(_ snapshot: MetricsSnapshot, to file: UnsafeMutablePointer<FILE>) {
        var metrics: [String: [String: Double]] = [:]
        for s in snapshot.statistics() {
            var entry: [String: Double] = ["count": s.count]
            if s.kind == .histogram {
                for (name, p) in [("p50", 50.0), ("p90", 90), ("p99", 99)] { entry[name] = s.percentile(p) }
                entry["max"] = s.max
            } else if let max = s.max {
                entry["max"] = max
            }
            metrics[s.key.display] = entry
        }
        var line: [String: Any] = ["t": (snapshot.duration * 1000).rounded() / 1000, "metrics": metrics]
        if let shard = snapshot.shards.first { line["shard"] = shard.description }
        guard var data = try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys]) else { return }
        data.append(0x0A)
        data.withUnsafeBytes { _ = fwrite($0.baseAddress, 1, $0.count, file) }
        fflush(file)
    }

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

    func stop() {
        let done = loop.makePromise(of: Void.self)
        task?.cancel(promise: done)
        if task == nil { done.succeed() }
        try? done.futureResult.wait()
        try? pending?.wait()
        if status { fputs("\r\u{1B}[2K", stderr) }
        if let jsonl { fclose(jsonl) }
        jsonl = nil
        try? server?.close().wait()
    }
}
