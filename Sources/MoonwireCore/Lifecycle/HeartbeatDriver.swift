import NIOCore

/// What a ``HeartbeatDriver`` asks of the connection it watches. A probe that cannot go
/// out is skipped: unanswered, it ends in ``heartbeatPeerIsDead()`` all the same.
protocol HeartbeatOwner: AnyObject {
    /// A ping probe is due, with this payload (its pong answers it).
    func heartbeatSendPing(_ payload: ByteBuffer)
    /// The application's heartbeat message is due (`heartbeat = { message = ... }`).
    func heartbeatSendMessage()
    /// The probe went unanswered: drop the connection.
    func heartbeatPeerIsDead()
}

extension HeartbeatOwner {
    /// A connection without a heartbeat message sends none.
    func heartbeatSendMessage() {}
}

/// Runs the heartbeat of one connection, a client's or a server peer's: keeps its
/// ``HeartbeatTimer`` armed at the ``HeartbeatMonitor``'s next deadline, ticks the monitor
/// when the timer fires, and hands what is due to its owner. The owner only reports its
/// traffic here and performs the probes. On the connection's loop only.
///
/// ```swift
/// let heartbeat = HeartbeatDriver(.init(interval: .seconds(30)), eventLoop: loop)
/// heartbeat.owner = self          // heartbeatSendPing(_:) after 30 s of silence
/// heartbeat.start()               // the connection opened
/// heartbeat.didSend()             // on every send: postpones the probe
/// heartbeat.didReceiveMessage()   // on every message
/// heartbeat.stop()                // closing
/// ```
final class HeartbeatDriver {
    /// The state machine: settings, deadlines, the probe in flight, the last round trip.
    private(set) var monitor: HeartbeatMonitor
    private var timer = HeartbeatTimer()
    private let eventLoop: EventLoop
    /// The runtime's clock (virtual under `--virtual-time`), read for every deadline.
    private let clock: RuntimeClock
    /// Performs what is due; held strongly until the owner, which owns the driver, cuts the
    /// link (``SessionCore/disown()``).
    var owner: HeartbeatOwner?

    /// A driver for a connection not yet open; `configuration` nil for no heartbeat.
    init(_ configuration: HeartbeatMonitor.Configuration?, eventLoop: EventLoop) {
        self.monitor = HeartbeatMonitor(configuration)
        self.eventLoop = eventLoop
        self.clock = RuntimeClock.of(eventLoop)
    }

    /// The settings in force; nil when the heartbeat is off.
    var configuration: HeartbeatMonitor.Configuration? { self.monitor.configuration }

    /// The connection opened (or a pause ended): silence is counted from now.
    func start() {
        self.monitor.start(at: self.clock.now())
        self.arm()
    }

    /// The connection is closing, closed or paused: nothing to watch until ``start()``.
    func stop() {
        self.monitor.stop()
        self.timer.disarm()
    }

    /// New settings, or nil to turn the heartbeat off; on an open connection they count from now.
    func reconfigure(_ configuration: HeartbeatMonitor.Configuration?) {
        self.monitor.reconfigure(configuration, at: self.clock.now())
        self.arm()
    }

    /// Something went out (a message, or a ping the script sent).
    @inline(__always)
    func didSend() {
        // No heartbeat, nothing to time: no clock read on the message path.
        guard self.monitor.configuration != nil else { return }
        self.monitor.didSend(at: self.clock.now())
    }

    /// A message arrived that does not match the heartbeat's `reply` pattern (or there is none).
    @inline(__always)
    func didReceiveMessage() {
        guard self.monitor.configuration != nil else { return }
        if self.monitor.didReceiveMessage(at: self.clock.now()) { self.arm() }
    }

    /// A message arrived that matches the heartbeat's `reply` pattern.
    func didReceiveReply() {
        if self.monitor.didReceiveReply(at: self.clock.now()) { self.arm() }
    }

    /// A pong arrived.
    func didReceivePong(_ payload: ByteBuffer) {
        if self.monitor.didReceivePong(payload: payload.readableBytesView, at: self.clock.now()) { self.arm() }
    }

    /// A ping arrived.
    func didReceivePing() {
        if self.monitor.didReceivePing(at: self.clock.now()) { self.arm() }
    }

    // The answer to a probe brings the next one `interval` after it, before the timeout
    // the timer was armed for, hence the re-arm above; traffic otherwise only moves the
    // deadline later, which the armed timer finds out when it fires.
    private func arm() {
        self.timer.arm(at: self.monitor.nextDeadline, on: self.eventLoop) { [weak self] in
            guard let self else { return }
            self.timer.fired()
            self.due()
        }
    }

    private func due() {
        switch self.monitor.tick(at: self.clock.now()) {
        case .sendPing(let payload)?:
            self.owner?.heartbeatSendPing(ByteBuffer(bytes: payload))
        case .sendMessage?:
            self.owner?.heartbeatSendMessage()
        case .declareDead?:
            self.owner?.heartbeatPeerIsDead()
            return
        case nil:
            break
        }
        self.arm()
    }
}
