import NIOCore

/// Socket settings every moonwire channel uses, client or server, WebSocket or TCP.
enum ChannelTuning {
    /// The read buffer. A channel keeps its buffer for the next read, so an idle
    /// connection holds the current size (16 KiB here cost 16 KiB per connection).
    /// A read that fills the buffer makes the allocator jump up (1 KiB -> 16 KiB ->
    /// 256 KiB), so bulk traffic gets big reads after two or three.
    static var readAllocator: AdaptiveRecvByteBufferAllocator {
        AdaptiveRecvByteBufferAllocator(minimum: 256, initial: 1024, maximum: 1 << 20)
    }

    /// Reads per readiness event. NIO reads again only after a read that filled the
    /// buffer, so small-message traffic still costs one read; bulk traffic drains
    /// the socket without going back to epoll in between.
    static let readsPerEvent: UInt = 4
}
