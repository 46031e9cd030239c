import Foundation
import MoonwireCore
import MoonwireLua
import NIOCore
import NIOHTTP1
import NIOPosix

/// `GET /metrics` in the Prometheus text format (version 0.0.4), written by
/// swift-prometheus from each scrape's snapshot: see ``PrometheusExposition`` for
/// how the metrics map.
enum PrometheusEndpoint {
    static func bind(host: String, port: Int, group: EventLoopGroup, snapshot: @escaping @Sendable () -> EventLoopFuture<MetricsSnapshot>) throws -> Channel {
        let exposition = PrometheusExposition { ScriptRuntime.writeToStderr("moonwire: \($0)") }
        return try ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(Handler(exposition: exposition, snapshot: snapshot))
                }
            }
            .bind(host: host, port: port).wait()
    }

    final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let exposition: PrometheusExposition
        let snapshot: @Sendable () -> EventLoopFuture<MetricsSnapshot>
        private var path = ""

        init(exposition: PrometheusExposition, snapshot: @escaping @Sendable () -> EventLoopFuture<MetricsSnapshot>) {
            self.exposition = exposition
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
                    case .success(let s): respond(bound.value, status: .ok, body: exposition.render(s))
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
