import NIOCore

/// What a connection owns to serve its user, whatever its role: the send budget
/// (``OutboundBuffer``), the heartbeat (``HeartbeatDriver``) and the `auto_reply` rules with
/// their count. A client's ``ManagedConnection`` and a server's ``ServerPeer`` each hold one
/// and do through it what both do (answer a probe, write a message of their own ahead of
/// the queue, report the budget and the counters); the role decides only what is its own
/// (dial and reconnect, accept and upgrade) and when its transport may be written to.
///
/// On the connection's loop only.
///
/// ```swift
/// core = SessionCore(limit: 1024, bytes: 16 << 20, overflow: .error, pool: nil,
///                    heartbeat: config, autoReply: rules, eventLoop: loop)
/// core.own(self)
/// if let (reply, kind) = core.autoReply?.answer(to: message, kind: .text) { core.answerProbe(reply, kind: kind) }
/// ```
final class SessionCore {
    /// The send budget: what the socket cannot take yet waits here, bounded.
    let outbound: OutboundBuffer
    let heartbeat: HeartbeatDriver
    /// `auto_reply`: the peer's probes answered without reaching the script.
    let autoReply: AutoReply?
    /// The peer's probes answered (`stats().auto_replies`).
    private(set) var autoReplies = 0

    /// The parts of a connection not yet open; the role that holds it calls ``own(_:)`` once
    /// it is made.
    init(
        limit: Int, bytes: Int, overflow: SendQueue<OutboundMessage>.Overflow, pool: SendBudgetPool?,
        heartbeat: HeartbeatMonitor.Configuration?, autoReply: AutoReply?, eventLoop: EventLoop
    ) {
        self.outbound = OutboundBuffer(limit: limit, bytes: bytes, overflow: overflow, pool: pool)
        self.heartbeat = HeartbeatDriver(heartbeat, eventLoop: eventLoop)
        self.autoReply = autoReply
    }

    /// `role` counts what the budget writes and performs the heartbeat's probes. Both hold
    /// it strongly (no weak load, no side table on the role), so the role, which owns them,
    /// cuts the links with ``disown()`` once it has ended: a heartbeat's timer or the budget
    /// that calls back after that finds nobody to call.
    func own(_ role: OutboundWriter & HeartbeatOwner) {
        self.outbound.writer = role
        self.heartbeat.owner = role
    }

    /// Cuts the links ``own(_:)`` made.
    func disown() {
        self.outbound.writer = nil
        self.heartbeat.owner = nil
    }

    /// Answers the peer's probe: counted, then written as ``writeAhead(_:kind:)``. The
    /// caller has checked that its transport may be written to.
    func answerProbe(_ reply: ByteBuffer, kind: MessageKind) {
        self.autoReplies += 1
        self.writeAhead(reply, kind: kind)
    }

    /// Writes a message of the connection's own (a probe's answer, a heartbeat message) at
    /// once: ahead of the queue and past a hold for `ready()`, which wait for the script, but
    /// within the byte budget like any message. Never queued: one that cannot go now is
    /// skipped (a probe then goes unanswered, which the heartbeat notices).
    @discardableResult
    func writeAhead(_ data: ByteBuffer, kind: MessageKind) -> Bool {
        guard self.outbound.offer(OutboundMessage(data, kind: kind), direct: true) == .sent else { return false }
        self.outbound.writer?.outboundWrote(messages: 1, payloadBytes: data.readableBytes)
        return true
    }

    /// The counters `stats()` shows, with the role's message counters.
    func stats(_ messages: ConnectionStats) -> SessionStats {
        SessionStats(messages, outbound: self.outbound, autoReplies: self.autoReplies, lastRTT: self.heartbeat.monitor.lastRTT)
    }
}
