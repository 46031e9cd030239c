import NIOCore

/// A write position for ready-made frames and raw bytes: what is written here goes straight
/// to TLS or the socket.
final class RawOutlet: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private(set) var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func write(_ bytes: ByteBuffer, promise: EventLoopPromise<Void>?) {
        guard let context = self.context else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(self.wrapOutboundOut(bytes), promise: promise)
    }

    func flush() {
        self.context?.flush()
    }
}
