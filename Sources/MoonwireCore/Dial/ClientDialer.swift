import NIOCore
import NIOPosix

/// The TCP part of a client dial, shared by WebSocket and TCP connections: connects to
/// the target, or to a proxy and through its tunnel (``ProxyTunnel``), then lets the
/// connection add its handlers.
///
/// ```swift
/// ClientDialer.dial(on: loop, host: "example.org", port: 443, proxy: proxy, timeout: .seconds(10),
///                   adopt: { channel in self.channel = channel },
///                   configure: { channel in try channel.pipeline.syncOperations.addHandler(tls) })
///     .whenComplete { ... }   // success: the handlers are in place on a channel that reaches the target
/// ```
enum ClientDialer {
    /// `adopt` runs as soon as the channel exists (so that an abandoned dial can close it);
    /// `configure` adds the connection's handlers once bytes flow to the target: at once
    /// without a proxy, after the tunnel opened with one. Either may throw to abandon the
    /// dial. Proxy failures are reported in words naming the proxy and the step.
    static func dial(
        on loop: EventLoop,
        host: String,
        port: Int,
        proxy: ProxySettings?,
        timeout: TimeAmount,
        adopt: @escaping (Channel) throws -> Void,
        configure: @escaping (Channel) throws -> Void
    ) -> EventLoopFuture<Channel> {
        // A virtual clock holds still while the dial (resolve, connect, proxy) is under way.
        let clock = RuntimeClock.of(loop)
        clock.beginIO()
        return connect(on: loop, host: host, port: port, proxy: proxy, timeout: timeout, adopt: adopt, configure: configure)
            .always { _ in clock.endIO() }
    }

    private static func connect(
        on loop: EventLoop, host: String, port: Int, proxy: ProxySettings?, timeout: TimeAmount,
        adopt: @escaping (Channel) throws -> Void, configure: @escaping (Channel) throws -> Void
    ) -> EventLoopFuture<Channel> {
        let steps = NIOLoopBound((adopt: adopt, configure: configure), eventLoop: loop)
        let deadline = NIODeadline.now() + timeout
        let tunnel = NIOLoopBoundBox<ProxyTunnel?>(nil, eventLoop: loop)
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.maxMessagesPerRead, value: ChannelTuning.readsPerEvent)
            .channelOption(.recvAllocator, value: ChannelTuning.readAllocator)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try ClockProbe.attach(to: channel)
                    try steps.value.adopt(channel)
                    guard let proxy else {
                        try steps.value.configure(channel)
                        return
                    }
                    tunnel.value = try ProxyTunnel.start(
                        on: channel, proxy: proxy, targetHost: host, targetPort: port, deadline: deadline,
                        configure: steps.value.configure
                    )
                }
            }
        guard let proxy else {
            let connected: EventLoopFuture<Channel>
            if let address = try? SocketAddress(ipAddress: host, port: port) {
                // An IP address needs no resolver, nor Happy Eyeballs' race (one address, its
                // timers and state per dial): a reconnect storm dials thousands at once. A
                // failure reads as it would through them, "connection refused (127.0.0.1:9000)".
                connected = bootstrap.connect(to: address).flatMapErrorThrowing { error in
                    if case ChannelError.connectTimeout = error { throw error }
                    throw ConnectionError(step: .connect, message: "\(DialError.describe(error)) (\(DialError.describe(address)))")
                }
            } else {
                connected = bootstrap.connect(host: host, port: port)
            }
            return connected.map { channel in
                ChannelTuning.tuneLoopback(channel)
                return channel
            }
        }
        return bootstrap.connect(host: proxy.host, port: proxy.port)
            .flatMapErrorThrowing { error in throw Self.unreachable(proxy, error) }
            .flatMap { channel in
                guard let opened = tunnel.value?.future else { return channel.eventLoop.makeSucceededFuture(channel) }
                return opened.map { channel }
            }
    }

    /// The proxy itself could not be reached: say so, not that the target could not.
    private static func unreachable(_ proxy: ProxySettings, _ error: Error) -> Error {
        switch error {
        case let error as NIOConnectionError:
            guard let first = error.connectionErrors.first else {
                return ConnectionError(step: .dns, message: "cannot resolve proxy host '\(proxy.host)' (\(proxy.name))")
            }
            return ConnectionError(step: .connect, message: "\(proxy.name): \(DialError.describe(first.error))")
        default:
            return error
        }
    }
}
