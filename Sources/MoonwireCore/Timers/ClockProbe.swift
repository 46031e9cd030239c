import NIOCore

/// Tells a virtual ``RuntimeClock`` about a channel's I/O, from the socket's end of the
/// pipeline: every read, open, close and error is activity; a connect or a write is
/// outstanding until it completes (the kernel took the bytes). Only virtual clocks get
/// one (``attach(to:)`` adds nothing on a real clock), so real runs pay nothing.
public final class ClockProbe: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = NIOAny
    public typealias InboundOut = NIOAny
    public typealias OutboundIn = NIOAny
    public typealias OutboundOut = NIOAny

    private let clock: RuntimeClock

    private init(clock: RuntimeClock) {
        self.clock = clock
    }

    /// Adds a probe first in `channel`'s pipeline when its loop's clock is virtual. Call on
    /// the channel's loop, before it connects (a bootstrap's initializer).
    public static func attach(to channel: Channel) throws {
        let clock = RuntimeClock.of(channel.eventLoop)
        guard clock.isVirtual else { return }
        try channel.pipeline.syncOperations.addHandler(ClockProbe(clock: clock), position: .first)
    }

    public func channelActive(context: ChannelHandlerContext) {
        clock.noteActivity()
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        clock.noteActivity()
        context.fireChannelInactive()
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        clock.noteActivity()
        context.fireChannelRead(data)
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        clock.noteActivity()
        context.fireChannelReadComplete()
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        clock.noteActivity()
        context.fireUserInboundEventTriggered(event)
    }

    public func errorCaught(context: ChannelHandlerContext, error: Error) {
        clock.noteActivity()
        context.fireErrorCaught(error)
    }

    public func channelWritabilityChanged(context: ChannelHandlerContext) {
        clock.noteActivity()
        context.fireChannelWritabilityChanged()
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: outstanding(promise, on: context))
    }

    public func connect(context: ChannelHandlerContext, to address: SocketAddress, promise: EventLoopPromise<Void>?) {
        context.connect(to: address, promise: outstanding(promise, on: context))
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        clock.noteActivity()
        context.close(mode: mode, promise: promise)
    }

    /// A promise that ends the operation on the clock when it completes.
    private func outstanding(_ promise: EventLoopPromise<Void>?, on context: ChannelHandlerContext) -> EventLoopPromise<Void> {
        let clock = self.clock
        let tracked = promise ?? context.eventLoop.makePromise()
        clock.beginIO()
        tracked.futureResult.assumeIsolated().whenComplete { _ in clock.endIO() }
        return tracked
    }
}
