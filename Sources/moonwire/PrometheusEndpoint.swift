import Foundation
import MoonwireCore
import NIOCore
import NIOHTTP1
import NIOPosix

/// `GET /metrics` in the Prometheus text format (version 0.0.4): counters
/// and gauges as they are, histograms as summaries (quantiles read from the
/// HDR histogram, with _sum and _count). Names get the `moonwire_` prefix and
/// times the `_seconds` suffix; the shard, if any, is a label on every line.
enum PrometheusEndpoint {
    static func bind(host: String, port: Int, group: EventLoopGroup, snapshot: @escaping @Sendable () -> EventLoopFuture<MetricsSnapshot>) throws -> Channel {
        try ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(Handler(snapshot: snapshot))
                }
            }
            .bind(host: host, port: port).wait()
    }

    static let quantiles = [0.5, 0.9, 0.99, 0.999]

    /// The exposition text of `snapshot`.
    static func render(_ snapshot: MetricsSnapshot) -> String {
        var out = ""
        let shardLabel = snapshot.shards.first.map { ["shard": $0.description] } ?? [:]
        var byName: [String: [MetricStatistics]] = [:]
        var kinds: [String: MetricsRegistry.Kind] = [:]
        for s in snapshot.statistics() {
            byName[s.key.name, default: []].append(s)
            kinds[s.key.name] = s.kind
        }
        for name in byName.keys.sorted() {
            let rows = byName[name]!
            switch kinds[name]! {
            case .counter:
                let full = "moonwire_" + name + "_total"
                out += "# TYPE \(full) counter\n"
                for s in rows { out += line(full, s.key.tags.merging(shardLabel) { a, _ in a }, s.count) }
            case .gauge:
                let full = "moonwire_" + name
                out += "# TYPE \(full) gauge\n"
                for s in rows { out += line(full, s.key.tags.merging(shardLabel) { a, _ in a }, s.value ?? 0) }
            case .histogram:
                let full = "moonwire_" + name + (name.hasSuffix("_seconds") ? "" : "_seconds")
                out += "# TYPE \(full) summary\n"
                for s in rows {
                    let tags = s.key.tags.merging(shardLabel) { a, _ in a }
                    for q in quantiles {
                        out += line(full, tags.merging(["quantile": String(q)]) { a, _ in a }, s.percentile(q * 100) ?? .nan)
                    }
                    out += line(full + "_sum", tags, (s.mean ?? 0) * s.count)
                    out += line(full + "_count", tags, s.count)
                }
            }
        }
        return out
    }

    private static func line(_ name: String, _ labels: [String: String], _ value: Double) -> String {
        let rendered = labels.isEmpty ? "" : "{" + labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\(escape($0.value))\"" }.joined(separator: ",") + "}"
        return "\(name)\(rendered) \(format(value))\n"
    }

    private static func escape(_ v: String) -> String {
        v.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }

    private static func format(_ v: Double) -> String {
        if v.isNaN { return "NaN" }
        if v == v.rounded() && abs(v) < 1e15 { return String(Int64(v)) }
        return String(v)
    }

    final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let snapshot: @Sendable () -> EventLoopFuture<MetricsSnapshot>
        private var path = ""

        init(snapshot: @escaping @Sendable () -> EventLoopFuture<MetricsSnapshot>) {
            self.snapshot = snapshot
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): path = head.uri
            case .body: break
            case .end:
                let loop = context.eventLoop
                let bound = NIOLoopBound(context, eventLoop: loop)
                guard path == "/metrics" || path.hasPrefix("/metrics?") else {
                    respond(bound.value, status: .notFound, body: "not found: GET /metrics\n")
                    return
                }
                snapshot().hop(to: loop).whenComplete { [self] result in
                    switch result {
                    case .success(let s): respond(bound.value, status: .ok, body: PrometheusEndpoint.render(s))
                    case .failure: respond(bound.value, status: .serviceUnavailable, body: "the run has ended\n")
                    }
                }
            }
        }

        private func respond(_ context: ChannelHandlerContext, status: HTTPResponseStatus, body: String) {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
            headers.add(name: "Content-Length", value: String(body.utf8.count))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
