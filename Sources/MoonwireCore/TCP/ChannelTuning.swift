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

    /// One read per readiness event: a second read would almost always hit EAGAIN
    /// for request/response traffic, a wasted system call per message.
    static let readsPerEvent: UInt = 1
}
