import NIOCore

/// Decides when an open connection sends a heartbeat probe and when its peer is dead.
///
/// A client (``Configuration/Watch/outboundSilence``, the `heartbeat` option of `mw.connect`) probes
/// after `interval` without sending anything, so a busy connection never pays for pings;
/// the probe must be answered within `timeout`. The probe is a WebSocket ping whose
/// payload names it, answered by the matching pong (which also measures ``lastRTT``), or
/// the application's heartbeat message, answered by any inbound message or only by one
/// matching `reply` (the caller does the matching and calls ``didReceiveReply(at:)``).
///
/// A server (``Configuration/Watch/inboundSilence``, "drop peers silent for longer than
/// `timeout`") probes after `interval` without hearing from the peer, so an idle but
/// healthy client answers with a pong, and declares it dead when `timeout` more passes in
/// silence; anything inbound counts. Without a probe (TCP with no message) the peer is
/// dead after `interval + timeout` of silence.
///
/// Deadlines only move later while the connection is busy, so the caller need not re-arm
/// its timer on every send: arm one at ``nextDeadline``, call ``tick(at:)`` when it fires,
/// and arm again at the new ``nextDeadline``. Re-arm after ``start(at:)`` and
/// ``reconfigure(_:at:)``, which can move it earlier, and when a `didReceive…` method
/// returns true: the answer to a probe in flight brings the next probe (`interval` after
/// it) before the armed timeout.
///
/// ```swift
/// var heartbeat = HeartbeatMonitor(.init(interval: .seconds(30), timeout: .seconds(10)))
/// heartbeat.start(at: .now())                       // the connection opened
/// arm(heartbeat.nextDeadline)                       // 30 s from now
/// heartbeat.didSend(at: .now())                     // postpones the ping
/// switch heartbeat.tick(at: .now()) {               // when the timer fires
/// case .sendPing(let payload)?: try connection.ping(ByteBuffer(bytes: payload))
/// case .sendMessage?: try connection.send(heartbeatMessage(), kind: .text)
/// case .declareDead?: perform(lifecycle.heartbeatFailed())
/// case nil: break
/// }
/// arm(heartbeat.nextDeadline)
/// ```
public struct HeartbeatMonitor {
    /// A heartbeat's settings (`c:heartbeat(opts)`, or the server's `heartbeat` option).
    public struct Configuration: Sendable, Hashable {
        /// How the connection is probed.
        public enum Probe: Sendable, Hashable {
            /// A WebSocket ping, answered by its pong.
            case ping
            /// The heartbeat `message`, answered as `reply` says.
            case message(reply: Reply)
        }

        /// What answers an application-level heartbeat message.
        public enum Reply: Sendable, Hashable {
            /// Any inbound message (no `reply` pattern).
            case anyMessage
            /// Only a message matching the `reply` pattern.
            case matching
        }

        /// Whose silence calls for a probe.
        public enum Watch: Sendable, Hashable {
            /// Ours: probe after `interval` without sending (a client). A client that
            /// keeps sending to a peer that went quiet probes too, after `interval`
            /// without hearing from it: otherwise a steady sender would never notice a
            /// half-open connection.
            case outboundSilence
            /// The peer's: probe after `interval` without hearing from it (a server).
            case inboundSilence
        }

        /// The silence after which a probe goes out.
        public let interval: TimeAmount
        /// How long a probe may stay unanswered.
        public let timeout: TimeAmount
        /// The probe; nil sends none, which only makes sense when watching the peer.
        public let probe: Probe?
        /// Whose silence calls for a probe.
        public let watch: Watch

        /// Creates settings; the defaults are a client's `heartbeat` option's (docs/scripting.md).
        public init(
            interval: TimeAmount = .seconds(30),
            timeout: TimeAmount = .seconds(10),
            probe: Probe? = .ping,
            watch: Watch = .outboundSilence
        ) {
            precondition(probe != nil || watch == .inboundSilence, "watching our own silence needs a probe to answer")
            self.interval = interval
            self.timeout = timeout
            self.probe = probe
            self.watch = watch
        }
    }

    /// What the caller must do when ``tick(at:)`` says so.
    public enum Action: Sendable, Hashable {
        /// Send a WebSocket ping with this payload.
        case sendPing(payload: [UInt8])
        /// Send the application's heartbeat message.
        case sendMessage
        /// The peer is dead: drop the connection without a handshake.
        case declareDead
    }

    private struct Outstanding {
        var id: UInt64
        var sentAt: NIODeadline
    }

    /// The settings in force; nil when the heartbeat is off (`c:heartbeat(false)`).
    public private(set) var configuration: Configuration?
    /// The round trip of the last answered probe that could be timed: a ping by its pong,
    /// or a heartbeat message by a matching reply (`stats().last_rtt`).
    public private(set) var lastRTT: TimeAmount?

    private var running = false
    private var lastOutbound = NIODeadline.uptimeNanoseconds(0)
    private var lastInbound = NIODeadline.uptimeNanoseconds(0)
    private var outstanding: Outstanding?
    // Never reset, so a pong to a probe from before a reconfiguration cannot pass for
    // the answer to a newer one.
    private var nextProbeID: UInt64 = 0

    /// Creates a monitor for a connection not yet open.
    ///
    /// - Parameter configuration: the settings, or nil for no heartbeat.
    public init(_ configuration: Configuration?) {
        self.configuration = configuration
    }

    /// When to call ``tick(at:)`` next; nil when nothing is watched.
    public var nextDeadline: NIODeadline? {
        guard self.running, let configuration = self.configuration else { return nil }
        if let outstanding = self.outstanding {
            return outstanding.sentAt + configuration.timeout
        }
        switch configuration.watch {
        case .outboundSilence: return min(self.lastOutbound, self.lastInbound) + configuration.interval
        case .inboundSilence: return self.lastInbound + configuration.interval
        }
    }

    /// The connection opened: silence is counted from `now`.
    public mutating func start(at now: NIODeadline) {
        self.running = true
        self.lastOutbound = now
        self.lastInbound = now
        self.outstanding = nil
    }

    /// The connection is closing or closed: nothing more to watch.
    public mutating func stop() {
        self.running = false
        self.outstanding = nil
    }

    /// New settings, or nil to turn the heartbeat off. On an open connection the new
    /// heartbeat counts from `now`, and a probe in flight no longer needs an answer.
    public mutating func reconfigure(_ configuration: Configuration?, at now: NIODeadline) {
        self.configuration = configuration
        if self.running { self.start(at: now) }
    }

    /// Something went out (a message, or a ping the script sent).
    public mutating func didSend(at now: NIODeadline) {
        self.lastOutbound = now
    }

    /// A message arrived that does not match the heartbeat's `reply` pattern (or there is
    /// none). True when it answered the probe in flight: re-arm.
    @discardableResult
    public mutating func didReceiveMessage(at now: NIODeadline) -> Bool {
        self.lastInbound = now
        guard let configuration = self.configuration else { return false }
        if configuration.watch == .inboundSilence || configuration.probe == .message(reply: .anyMessage) {
            return self.answered()
        }
        return false
    }

    /// A message arrived that matches the heartbeat's `reply` pattern. True when it
    /// answered the probe in flight: re-arm.
    @discardableResult
    public mutating func didReceiveReply(at now: NIODeadline) -> Bool {
        self.lastInbound = now
        guard let configuration = self.configuration, let outstanding = self.outstanding else { return false }
        switch configuration.probe {
        case .message?:
            self.lastRTT = now - outstanding.sentAt
            return self.answered()
        case .ping?, nil:
            return configuration.watch == .inboundSilence && self.answered()
        }
    }

    /// A pong arrived. Only the pong to the probe in flight answers a client's heartbeat;
    /// a pong to a script's own `c:ping()` or to an earlier probe does not. True when it
    /// answered the probe in flight: re-arm.
    @discardableResult
    public mutating func didReceivePong(payload: some Sequence<UInt8>, at now: NIODeadline) -> Bool {
        self.lastInbound = now
        guard let configuration = self.configuration, let outstanding = self.outstanding else { return false }
        if configuration.probe == .ping, payload.elementsEqual(Self.payload(forProbe: outstanding.id)) {
            self.lastRTT = now - outstanding.sentAt
            return self.answered()
        }
        return configuration.watch == .inboundSilence && self.answered()
    }

    /// A ping arrived: the peer is alive, which matters when watching its silence. True
    /// when it answered the probe in flight: re-arm.
    @discardableResult
    public mutating func didReceivePing(at now: NIODeadline) -> Bool {
        self.lastInbound = now
        return self.configuration?.watch == .inboundSilence && self.answered()
    }

    /// The probe in flight, if any, is answered; true if there was one.
    private mutating func answered() -> Bool {
        defer { self.outstanding = nil }
        return self.outstanding != nil
    }

    /// The timer armed at ``nextDeadline`` fired (or any time): returns the probe to send
    /// or the verdict, if one is due. After ``Action/declareDead`` the monitor stops.
    public mutating func tick(at now: NIODeadline) -> Action? {
        guard self.running, let configuration = self.configuration, let deadline = self.nextDeadline, now >= deadline else {
            return nil
        }
        if self.outstanding != nil {
            self.stop()
            return .declareDead
        }
        let id = self.nextProbeID
        self.nextProbeID &+= 1
        self.outstanding = Outstanding(id: id, sentAt: now)
        self.lastOutbound = now
        switch configuration.probe {
        case .ping?: return .sendPing(payload: Self.payload(forProbe: id))
        case .message?: return .sendMessage
        case nil: return nil
        }
    }

    /// Readable in a packet capture, and unlikely to collide with a script's own pings.
    private static func payload(forProbe id: UInt64) -> [UInt8] {
        Array("moonwire-heartbeat-\(id)".utf8)
    }
}
