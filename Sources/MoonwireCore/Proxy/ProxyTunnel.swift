import NIOCore
import NIOExtras
import NIOHTTP1
import NIOSOCKS

/// Opens a tunnel through a proxy on a channel connected to it, with SwiftNIO's own
/// handlers: `NIOHTTP1ProxyConnectHandler` (HTTP `CONNECT`) or `SOCKSClientHandler`
/// (SOCKS5). When the tunnel carries bytes to the target, `configure` adds the
/// connection's own handlers (TLS, WebSocket, framing) as if the channel had just
/// connected to the target; the proxy's handlers are gone by then.
///
/// Pipelines while the tunnel opens (bytes from the network enter on the left):
/// - HTTP: `ResponseHold`, request encoder, response decoder, status observer,
///   `NIOHTTP1ProxyConnectHandler`, `Watcher`.
/// - SOCKS5: `SOCKSClientHandler`, `Watcher`.
///
/// Failures are `connect` errors that name the proxy, the target and what went wrong.
final class ProxyTunnel {
    private let proxy: ProxySettings
    private let targetHost: String
    private let targetPort: Int
    private let promise: EventLoopPromise<Void>
    private var status: HTTPResponseStatus?
    private var done = false

    /// The tunnel, once `configure` ran; or a failure in words.
    var future: EventLoopFuture<Void> { self.promise.futureResult }

    private init(proxy: ProxySettings, targetHost: String, targetPort: Int, eventLoop: EventLoop) {
        self.proxy = proxy
        self.targetHost = targetHost
        self.targetPort = targetPort
        self.promise = eventLoop.makePromise()
    }

    private var target: String { HostPort.format(host: self.targetHost, port: self.targetPort) }

    /// Adds the proxy handlers to a channel that is connecting to the proxy.
    static func start(
        on channel: Channel,
        proxy: ProxySettings,
        targetHost: String,
        targetPort: Int,
        deadline: NIODeadline,
        configure: @escaping (Channel) throws -> Void
    ) throws -> ProxyTunnel {
        let tunnel = ProxyTunnel(proxy: proxy, targetHost: targetHost, targetPort: targetPort, eventLoop: channel.eventLoop)
        let pipeline = channel.pipeline.syncOperations
        let watcher = Watcher(tunnel: tunnel)
        switch proxy.kind {
        case .http:
            var headers = HTTPHeaders()
            headers.add(name: "Host", value: tunnel.target)
            if let credentials = proxy.credentials {
                headers.add(name: "Proxy-Authorization", value: credentials.basic)
            }
            let connected = channel.eventLoop.makePromise(of: Void.self)
            let hold = ResponseHold()
            let encoder = HTTPRequestEncoder()
            let decoder = ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes))
            let observer = StatusObserver(tunnel: tunnel)
            let handler = NIOHTTP1ProxyConnectHandler(
                targetHost: targetHost, targetPort: targetPort, headers: headers, deadline: deadline, promise: connected)
            try pipeline.addHandlers([hold, encoder, decoder, observer, handler, watcher])
            connected.futureResult.assumeIsolated().whenSuccess {
                // The decoder leaves on the next loop turn; the tunnel's first bytes wait in
                // the hold, in front of it, until the connection's handlers are in place.
                pipeline.removeHandler(encoder, promise: nil)
                pipeline.removeHandler(observer, promise: nil)
                pipeline.removeHandler(decoder).assumeIsolated().whenComplete { _ in
                    tunnel.established(channel, configure: configure, watcher: watcher, hold: hold)
                }
            }
        case .socks5:
            let address: SOCKSAddress
            if let ip = try? SocketAddress(ipAddress: targetHost, port: targetPort) {
                address = .address(ip)
            } else {
                address = .domain(targetHost, port: targetPort)
            }
            watcher.onSOCKSEstablished = { tunnel.established(channel, configure: configure, watcher: watcher, hold: nil) }
            try pipeline.addHandlers([SOCKSClientHandler(targetAddress: address), watcher])
        }
        return tunnel
    }

    /// Adds the connection's handlers, then removes the tunnel's last ones (the hold passes
    /// on what arrived early, once the connection knows it is open).
    private func established(_ channel: Channel, configure: (Channel) throws -> Void, watcher: Watcher, hold: ResponseHold?) {
        guard !self.done else { return }
        guard channel.isActive else {
            self.fail(self.closedEarly)
            return
        }
        self.done = true
        do {
            try configure(channel)
        } catch {
            self.promise.fail(error)
            return
        }
        // The connection opens first: the target's early bytes (a greeting) then find it open.
        channel.pipeline.syncOperations.removeHandler(watcher, promise: nil)
        self.promise.succeed(())
        if let hold {
            channel.pipeline.syncOperations.removeHandler(hold, promise: nil)
        }
    }

    /// The first failure ends the dial; later ones (the close that follows) are its echo.
    private func fail(_ error: Error) {
        guard !self.done else { return }
        self.done = true
        self.promise.fail(self.describe(error))
    }

    private var closedEarly: ConnectionError {
        self.failure("closed the connection before the tunnel to \(self.target) was open")
    }

    private func failure(_ what: String) -> ConnectionError {
        ConnectionError(step: .connect, message: "\(self.proxy.name) \(what)")
    }

    /// A proxy failure in words: who refused what, and why.
    private func describe(_ error: Error) -> Error {
        switch error {
        case let error as NIOHTTP1ProxyConnectHandler.Error:
            if let status = self.status, !(200..<300).contains(status.code) {
                var words = "refused CONNECT to \(self.target): \(status.code) \(status.reasonPhrase)"
                if status.code == 407 || status.code == 401 {
                    words += self.proxy.credentials == nil
                        ? " (give the user name and password in the proxy URL: http://user:pass@host:port)"
                        : " (wrong user name or password?)"
                }
                return self.failure(words)
            }
            if error == .httpProxyHandshakeTimeout() {
                return ConnectionError(step: .timeout, message: "\(self.proxy.name) did not answer CONNECT to \(self.target) in time")
            }
            if error == .invalidProxyResponse() {
                return self.failure("answered CONNECT to \(self.target) with a body")
            }
            return self.closedEarly
        case let error as SOCKSError.ConnectionFailed:
            return self.failure("could not connect to \(self.target): \(Self.words(error.reply))")
        case is SOCKSError.NoValidAuthenticationMethod, is SOCKSError.InvalidAuthenticationSelection:
            return self.failure("requires authentication, which moonwire does not offer for SOCKS5")
        case let error as SOCKSError.InvalidProtocolVersion:
            return self.failure("is not a SOCKS5 proxy (it answered with version \(error.actual))")
        case is HTTPParserError:
            return self.failure("is not an HTTP proxy (its answer to CONNECT is not HTTP)")
        case let error as ConnectionError:
            return error
        default:
            return self.failure("failed opening the tunnel to \(self.target): \(DialError.describe(error))")
        }
    }

    private static func words(_ reply: SOCKSServerReply) -> String {
        switch reply {
        case .serverFailure: return "general failure"
        case .notAllowed: return "not allowed by its rules"
        case .networkUnreachable: return "network unreachable"
        case .hostUnreachable: return "host unreachable"
        case .refused: return "connection refused"
        case .ttlExpired: return "TTL expired"
        case .commandUnsupported: return "command not supported"
        case .addressUnsupported: return "address type not supported"
        default: return "reply \(reply.value)"
        }
    }

    /// Keeps the proxy's answer status for the error message (the connect handler's error
    /// does not expose it).
    private final class StatusObserver: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPClientResponsePart
        typealias InboundOut = HTTPClientResponsePart
        private let tunnel: ProxyTunnel

        init(tunnel: ProxyTunnel) { self.tunnel = tunnel }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .head(let head) = self.unwrapInboundIn(data) { self.tunnel.status = head.status }
            context.fireChannelRead(data)
        }
    }

    /// At the end of the pipeline while the tunnel opens: ends the dial on an error or an
    /// early close, and reports SOCKS5's success.
    private final class Watcher: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = NIOAny
        private let tunnel: ProxyTunnel
        var onSOCKSEstablished: (() -> Void)?

        init(tunnel: ProxyTunnel) { self.tunnel = tunnel }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is SOCKSProxyEstablishedEvent, let established = self.onSOCKSEstablished {
                self.onSOCKSEstablished = nil
                established()
                return
            }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            self.tunnel.fail(error)
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.tunnel.fail(self.tunnel.closedEarly)
            context.fireChannelInactive()
        }

        /// A channel that never became active is torn down without channelInactive.
        func handlerRemoved(context: ChannelHandlerContext) {
            self.tunnel.fail(self.tunnel.closedEarly)
        }
    }

    /// First in an HTTP proxy's pipeline: passes the proxy's answer (up to the blank line
    /// that ends its head) to the HTTP decoder, and holds what follows (the target's first
    /// bytes) until it is removed, when it passes them on to the connection's handlers.
    private final class ResponseHold: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        private var headDone = false
        private var tail: [UInt8] = []
        private var held: ByteBuffer?

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = self.unwrapInboundIn(data)
            guard !self.headDone else {
                self.held.setOrWriteBuffer(&buffer)
                return
            }
            // Find "\r\n\r\n", also when it is split across reads.
            var index = buffer.readerIndex
            while index < buffer.writerIndex, !self.headDone, let byte = buffer.getInteger(at: index, as: UInt8.self) {
                self.tail.append(byte)
                if self.tail.count > 4 { self.tail.removeFirst() }
                if self.tail == [13, 10, 13, 10] { self.headDone = true }
                index += 1
            }
            let head = buffer.readSlice(length: index - buffer.readerIndex)!
            if buffer.readableBytes > 0 { self.held = buffer }
            context.fireChannelRead(self.wrapInboundOut(head))
        }

        func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
            if let held = self.held, held.readableBytes > 0 {
                self.held = nil
                context.fireChannelRead(self.wrapInboundOut(held))
                context.fireChannelReadComplete()
            }
            context.leavePipeline(removalToken: removalToken)
        }
    }
}
