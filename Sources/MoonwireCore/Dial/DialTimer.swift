import NIOCore
import NIOTLS

/// How long each step of a dial that opened took. The steps follow one another, so
/// they add up to the whole: `dns + tcp + (tls ?? 0) + (handshake ?? 0) == total`.
///
/// ```swift
/// func connectionDidOpen(_ c: ClientConnection, info: ConnectionOpenInfo) {
///     if let timing = info.timing { print("tls took \(timing.tls ?? .zero)") }
/// }
/// ```
public struct ConnectTiming: Sendable, Equatable {
    /// Resolving the host name; zero for an IP address.
    public var dns: TimeAmount
    /// From the resolved addresses to a connected socket (every address tried).
    public var tcp: TimeAmount
    /// The TLS handshake (`wss://`, `tls://`); nil without TLS.
    public var tls: TimeAmount?
    /// The WebSocket upgrade, request out to `101` in; nil for `tcp://` and `tls://`.
    public var handshake: TimeAmount?
    /// The dial's start to the open.
    public var total: TimeAmount
}

/// Times the dials of one connection object. The connection starts it at each dial and
/// finishes it at the open; in between, a ``DialTimingHandler`` in the dial's pipeline
/// marks the steps NIO takes on its own: the bootstrap builds the channel once the host
/// is resolved (so the handler's arrival ends `dns`), `channelActive` ends `tcp`, and
/// the TLS handler's `handshakeCompleted` event ends `tls`. Nothing here blocks or
/// waits; it only reads the clock. On the connection's loop only.
final class DialTimer {
    enum Step { case resolved, connected, secured }

    private var dial = 0
    private var started = NIODeadline.now()
    private var resolved: NIODeadline?
    private var connected: NIODeadline?
    private var secured: NIODeadline?

    /// A new dial begins. An IP address is not resolved (``ClientDialer`` connects to it
    /// directly): its `dns` is zero.
    func start(hostIsIPAddress: Bool) {
        dial += 1
        started = .now()
        resolved = hostIsIPAddress ? started : nil
        connected = nil
        secured = nil
    }

    /// The handler for a channel of the current dial. It goes after the TLS handler, if
    /// any, which fires the event that ends the TLS step.
    func handler(secure: Bool) -> DialTimingHandler {
        DialTimingHandler(timer: self, dial: dial, secure: secure)
    }

    /// The first mark of each step wins (Happy Eyeballs may build a second channel).
    func mark(_ step: Step, dial: Int) {
        guard dial == self.dial else { return }
        let now = NIODeadline.now()
        switch step {
        case .resolved: if resolved == nil { resolved = now }
        case .connected: if connected == nil { connected = now }
        case .secured: if secured == nil { secured = now }
        }
    }

    /// The dial opened now. `secure`: it had a TLS step; `handshake`: a WebSocket
    /// upgrade followed. The last step runs until now, so the steps add up to the total.
    func finish(secure: Bool, handshake: Bool) -> ConnectTiming {
        let now = NIODeadline.now()
        // When each step ended, in order (a step NIO skipped ends where the one before did).
        let resolvedAt = max(resolved ?? started, started)
        let connectedAt = min(max(connected ?? resolvedAt, resolvedAt), now)
        let securedAt = secure ? min(max(secured ?? connectedAt, connectedAt), now) : connectedAt
        return ConnectTiming(
            dns: resolvedAt - started,
            tcp: (secure || handshake ? connectedAt : now) - resolvedAt,
            tls: secure ? (handshake ? securedAt : now) - connectedAt : nil,
            handshake: handshake ? now - securedAt : nil,
            total: now - started
        )
    }
}

/// Marks a dial's steps for its ``DialTimer`` and leaves the pipeline once the last
/// one it can see (TCP connected, or TLS done) has passed.
final class DialTimingHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let timer: DialTimer
    private let dial: Int
    private let secure: Bool

    init(timer: DialTimer, dial: Int, secure: Bool) {
        self.timer = timer
        self.dial = dial
        self.secure = secure
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard context.channel.isActive else {
            timer.mark(.resolved, dial: dial)
            return
        }
        // Through a proxy the handlers come once the tunnel is open: resolving and
        // connecting to the proxy and the tunnel all count as `tcp`.
        timer.mark(.connected, dial: dial)
        if !secure { context.pipeline.syncOperations.removeHandler(context: context, promise: nil) }
    }

    func channelActive(context: ChannelHandlerContext) {
        timer.mark(.connected, dial: dial)
        context.fireChannelActive()
        if !secure { context.pipeline.syncOperations.removeHandler(context: context, promise: nil) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case TLSUserEvent.handshakeCompleted = event else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        timer.mark(.secured, dial: dial)
        context.fireUserInboundEventTriggered(event)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
