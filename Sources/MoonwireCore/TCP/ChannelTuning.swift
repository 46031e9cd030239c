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
    /// the socket without going back to epoll in between: up to 16 MiB (16 reads of
    /// the 1 MiB buffer), the default send budget. A connection that sends as fast as
    /// the socket takes (`c:drain()` pacing) hands the kernel several MiB per tick;
    /// reading only 4 MiB of the answers per tick left the rest piling up in the peer
    /// (an echo server held 600 MiB after 2 GB at 64 KiB, and ran 15 % slower). The cost
    /// is fairness: one connection flooding a loop holds it for up to 16 MiB of messages
    /// before the next connection's turn. A connection whose inbox paused reading
    /// (`autoRead` off) still gets the rest of the read in progress: at most 16 MiB, and
    /// never more than the kernel had buffered for it (6 MiB at most with Debian's
    /// default `tcp_rmem`).
    static let readsPerEvent: UInt = 16
}
