/// Message and byte counters of one connection, client or server peer, WebSocket or TCP:
/// its owner counts every message here, and nowhere else.
///
/// ```swift
/// var stats = ConnectionStats()
/// stats.countSent(bytes: 5)
/// stats.countReceived(bytes: 12)
/// print(stats.messagesSent, stats.bytesReceived)   // 1 12
/// ```
public struct ConnectionStats: Sendable, Hashable {
    /// Data messages sent.
    public var messagesSent = 0
    /// Data messages received.
    public var messagesReceived = 0
    /// Payload bytes of the messages sent (before compression).
    public var bytesSent = 0
    /// Payload bytes of the messages received (after decompression).
    public var bytesReceived = 0

    public init() {}

    /// `messages` messages of `bytes` payload bytes in all went out (a fragment that does
    /// not end its message counts its bytes only).
    @inline(__always)
    public mutating func countSent(bytes: Int, messages: Int = 1) {
        self.messagesSent += messages
        self.bytesSent += bytes
    }

    /// A message of `bytes` payload bytes arrived.
    @inline(__always)
    public mutating func countReceived(bytes: Int) {
        self.messagesReceived += 1
        self.bytesReceived += bytes
    }
}
