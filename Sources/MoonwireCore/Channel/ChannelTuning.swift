import Foundation
import NIOCore

/// Socket settings every moonwire channel uses, client or server, WebSocket or TCP.
enum ChannelTuning {
    /// The read buffer. A channel keeps its buffer for the next read, so an idle
    /// connection holds the current size: 16 KiB here once cost 16 KiB per connection,
    /// and 512 bytes instead of 1 KiB took an idle client connection from 8.16 to 7.2 – 7.7 KiB
    /// (15 000 of them, docs/performance.md). Each read that fills the buffer doubles it,
    /// up to 1 MiB, so bulk traffic gets big reads after a few; two reads in a row of at
    /// most half of it halve it, down to 256 bytes. A handshake's response or request
    /// longer than 512 bytes takes one more read.
    static var readAllocator: AdaptiveRecvByteBufferAllocator {
        AdaptiveRecvByteBufferAllocator(minimum: 256, initial: 512, maximum: 1 << 20)
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

    /// Connections a listening socket accepts per wake-up of its loop: enough that a
    /// reconnect storm (thousands queued at once) drains in a few turns of the loop, few
    /// enough that the peers already connected are read in between.
    static let acceptsPerEvent: UInt = 256

    /// The kernel send buffer of a loopback connection: 512 KiB asked (the kernel doubles
    /// it, 1 MiB). Linux grows a socket's send buffer with its congestion window, which
    /// on loopback never stops growing: up to `tcp_wmem`'s maximum (4 MiB), though the
    /// path needs almost nothing (its bandwidth-delay product is a few KiB). Client and
    /// server then pass each other bursts of 4 MiB and more, which do not fit a core's
    /// cache: every copy, in the kernel and in both programs, reads memory gone cold. With
    /// 1 MiB the bursts stay in cache: a 64 KiB echo stream on one CPU went from about
    /// 7 000 to 12 000 messages/s, 1 KiB and 32 B were unchanged, and with client and
    /// server on two CPUs no size got slower. Less than 1 MiB cost small messages (1 KiB
    /// at 416 KiB: 120 000 against 180 000 messages/s), so where `net.core.wmem_max` would
    /// cut the size below what is asked (Debian's default is 208 KiB), the kernel's own
    /// sizing is left alone. Not for a connection through a proxy: its loopback hop
    /// carries traffic to a remote host.
    static let loopbackSendBuffer: Int? = {
        let asked = 512 << 10
        guard let text = try? String(contentsOfFile: "/proc/sys/net/core/wmem_max", encoding: .utf8),
              let max = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), max >= asked
        else { return nil }
        return asked
    }()

    /// Applies ``loopbackSendBuffer`` to a connected channel whose peer is on this host.
    static func tuneLoopback(_ channel: Channel) {
        guard let size = Self.loopbackSendBuffer, let peer = channel.remoteAddress, Self.isLoopback(peer) else { return }
        try? channel.syncOptions?.setOption(.socketOption(.so_sndbuf), value: size)
    }

    /// 127.0.0.0/8, ::1, or an IPv4 loopback address mapped into IPv6.
    static func isLoopback(_ address: SocketAddress) -> Bool {
        guard let ip = address.ipAddress?.lowercased() else { return false }
        return ip.hasPrefix("127.") || ip == "::1" || ip.hasPrefix("::ffff:127.")
    }
}
