import NIOCore

/// The life of one long-lived connection, across any number of dials, as a pure state
/// machine: each event returns the actions to perform, in order.
///
/// States, as `c:state()` names them:
/// - `connecting`: the first dial (or the first after the script revived a closed
///   connection) is in progress.
/// - `open`: data flows; sends go straight out.
/// - `closing`: our close frame is out, or a dead connection is being dropped.
/// - `reconnecting`: the connection was lost (or a dial failed) and another dial is
///   asked of the `on_reconnect` hook, waiting for its timer, or in progress.
/// - `closed`: for good, unless the script calls `c:reconnect()`.
///
/// Rules: a deliberate ``closeRequested(code:reason:)`` never reconnects; any other close
/// does, unless the peer's close code means "do not come back"
/// (``ReconnectPolicy/stops(afterPeerClose:)``: 1003, 1008, `stopCodes`, and 1000 when
/// `onNormalClose` is false); a handshake
/// refused with HTTP 4xx stops unless `retryHTTP`; so do used-up attempts; a successful
/// open resets the attempt count. Failed dials report an error; a connection that had
/// opened reports a close. Whatever happens, the connection's last report is exactly one
/// close with `willReconnect == false`, so the script and `moonwire run` know it ended.
///
/// Re-entrancy: actions that run script code (``Action/notifyOpen(reconnects:)``,
/// ``Action/reportClose(_:)``, ``Action/reportError(_:)``,
/// ``Action/askReconnectHook(attempt:delay:)``) may call back into the machine. They
/// come last in their list, or the state is already final, so the rest of a list
/// never goes stale. What has to wait until the handlers ran (flushing the queue after
/// `on_open`, asking the hook after `on_close`) comes out of ``afterHandlers()``, which
/// the caller calls after performing every list.
///
/// ```swift
/// var life = ConnectionLifecycle(reconnect: ReconnectPolicy())
/// perform(life.start())                       // [.dial(attempt: 0)]
/// perform(life.opened())                      // [.startHeartbeat, .notifyOpen(reconnects: 0)]
/// perform(life.afterHandlers())               // [.flushQueue]
/// perform(life.closed(CloseInfo(code: 1006, reason: "", clean: false, initiator: .network)))
///                                             // [.stopHeartbeat, .reportClose(… willReconnect: true)]
/// perform(life.afterHandlers())               // [.askReconnectHook(attempt: 1, delay: ~1 s)]
/// perform(life.reconnectHookAnswered(.proceed))   // [.startRetryTimer(delay: ~1 s)]
/// perform(life.retryTimerFired())             // [.dial(attempt: 1)]
/// ```
public struct ConnectionLifecycle {
    /// The state the script sees.
    public enum State: String, Sendable, Hashable, CaseIterable {
        case connecting, open, closing, closed, reconnecting
    }

    /// What `on_close` is told.
    public struct CloseReport: Sendable, Hashable, CustomStringConvertible {
        /// The close code; 1006 when no close handshake took place.
        public var code: UInt16
        /// The close reason, or what went wrong when no connection was open.
        public var reason: String
        /// True when close frames went both ways.
        public var clean: Bool
        /// Who ended the connection.
        public var by: CloseInfo.Initiator
        /// Whether another dial will follow.
        public var willReconnect: Bool

        /// Creates a report.
        public init(code: UInt16, reason: String, clean: Bool, by: CloseInfo.Initiator, willReconnect: Bool) {
            self.code = code
            self.reason = reason
            self.clean = clean
            self.by = by
            self.willReconnect = willReconnect
        }

        /// For logs: `1001 "restart" (clean, by peer, will reconnect)`.
        public var description: String {
            let clean = self.clean ? "clean" : "unclean"
            let next = self.willReconnect ? "will reconnect" : "final"
            return "\(self.code) \"\(self.reason)\" (\(clean), by \(self.by.rawValue), \(next))"
        }
    }

    /// Where a message the script sends goes now.
    public enum SendRoute: Sendable, Hashable {
        /// Out on the open connection.
        case send
        /// Into the ``SendQueue``, for after the next open.
        case enqueue
        /// Nowhere: the connection is closing or closed for good (`nil, "closed"`).
        case refuse
    }

    /// What the `on_reconnect` hook decided about the attempt it was asked about.
    public enum ReconnectAnswer: Sendable, Hashable {
        /// Go ahead with the proposed delay (also the answer when there is no hook).
        case proceed
        /// Go ahead after this delay instead.
        case delay(TimeAmount)
        /// Stop reconnecting: the connection closes for good.
        case stop
    }

    /// What the caller must do.
    public enum Action: Sendable, Hashable {
        /// Dial the peer. `attempt` is 0 for a fresh dial and *n* for the *n*-th retry since
        /// the last open; the caller applies any URL or headers the hook changed.
        case dial(attempt: Int)
        /// Abandon the dial in progress; its later events must not reach this machine.
        case abortDial
        /// Start the ``HeartbeatMonitor`` (the connection just opened).
        case startHeartbeat
        /// Stop the ``HeartbeatMonitor``.
        case stopHeartbeat
        /// Run the `on_open` handlers with `info.reconnects`.
        case notifyOpen(reconnects: Int)
        /// Send everything in the ``SendQueue``, in order.
        case flushQueue
        /// Empty the ``SendQueue`` with ``SendQueue/removeAll()``; `c:close()` returns
        /// the count.
        case dropQueue
        /// Start the close handshake; the transport reports its end through
        /// ``ConnectionLifecycle/closed(_:)``.
        case sendClose(code: UInt16, reason: String)
        /// Drop the connection without a handshake; the transport still reports its end
        /// through ``ConnectionLifecycle/closed(_:)``.
        case dropConnection
        /// Run the `on_error` handlers.
        case reportError(ConnectionError)
        /// Run the `on_close` handlers.
        case reportClose(CloseReport)
        /// Ask the `on_reconnect` hook about this attempt, then pass its answer to
        /// ``ConnectionLifecycle/reconnectHookAnswered(_:)``.
        case askReconnectHook(attempt: Int, delay: TimeAmount)
        /// Arm the retry timer; when it fires, call ``ConnectionLifecycle/retryTimerFired()``.
        case startRetryTimer(delay: TimeAmount)
        /// Disarm the retry timer.
        case cancelRetryTimer
    }

    private enum Phase: Equatable {
        /// Made, not started; reported as `connecting`.
        case idle
        /// `fresh` when this is not a retry: `connecting` rather than `reconnecting`.
        case dialing(fresh: Bool)
        /// `flushPending` until the `on_open` handlers have run.
        case open(flushPending: Bool)
        case closing(Closing)
        case reconnecting(Retry)
        case closed
    }

    private struct Closing: Equatable {
        enum Then: Equatable {
            /// Deliberate close: stay closed.
            case finish
            /// Lost (heartbeat): apply the reconnect policy.
            case retry
            /// `c:reconnect()`: dial right away.
            case redial
        }

        /// The heartbeat found the peer dead; reported as 1006 by network whatever the
        /// transport says about the drop.
        var heartbeatDead: Bool
        var then: Then
    }

    private struct Retry: Equatable {
        enum Step: Equatable {
            /// The hook is still to be asked, after the close/error handlers ran.
            case askHook
            case awaitingAnswer
            case waitingForTimer
        }

        var step: Step
        var attempt: Int
        var delay: TimeAmount
        /// Reported again, with `willReconnect` false, if retrying stops here.
        var loss: CloseReport

        var cancellingTimer: [Action] { self.step == .waitingForTimer ? [.cancelRetryTimer] : [] }
    }

    private var phase = Phase.idle
    private var backoff: ReconnectBackoff
    private var reconnectEnabled: Bool
    private var hasOpened = false

    /// Successful opens after the first (`info.reconnects`, `stats().reconnects`).
    public private(set) var reconnects = 0

    /// Creates the lifecycle of a connection not yet dialled.
    ///
    /// - Parameters:
    ///   - reconnect: the policy, or nil for `reconnect = false`.
    ///   - random: the jitter's source, returning numbers in `0..<1`.
    public init(reconnect: ReconnectPolicy?, random: @escaping () -> Double = { Double.random(in: 0..<1) }) {
        self.backoff = ReconnectBackoff(policy: reconnect ?? ReconnectPolicy(), random: random)
        self.reconnectEnabled = reconnect != nil
    }

    /// The state the script sees.
    public var state: State {
        switch self.phase {
        case .idle: return .connecting
        case .dialing(let fresh): return fresh ? .connecting : .reconnecting
        case .open: return .open
        case .closing: return .closing
        case .reconnecting: return .reconnecting
        case .closed: return .closed
        }
    }

    /// False once closed for good: nothing keeps `moonwire run` going on its behalf.
    public var isAlive: Bool { self.phase != .closed }

    /// The reconnect policy in force, or nil when reconnection is off.
    public var reconnectPolicy: ReconnectPolicy? { self.reconnectEnabled ? self.backoff.policy : nil }

    /// Where a message the script sends now goes. While open (including inside `on_open`,
    /// before the queue is flushed, so a login sent there goes first) it is sent; while a
    /// connection is on its way, queued; after a deliberate close or for good, refused.
    public var sendRoute: SendRoute {
        switch self.phase {
        case .open: return .send
        case .idle, .dialing, .reconnecting: return .enqueue
        case .closing(let closing): return closing.then == .finish ? .refuse : .enqueue
        case .closed: return .refuse
        }
    }

    // MARK: - Events

    /// `mw.connect` returned; dial for the first time.
    public mutating func start() -> [Action] {
        guard self.phase == .idle else { return [] }
        self.phase = .dialing(fresh: true)
        return [.dial(attempt: 0)]
    }

    /// The dial succeeded: the handshake is done and data may flow.
    public mutating func opened() -> [Action] {
        guard case .dialing = self.phase else {
            // A dial this machine abandoned opened anyway; nobody wants it.
            return [.dropConnection]
        }
        if self.hasOpened { self.reconnects += 1 }
        self.hasOpened = true
        self.backoff.reset()
        self.phase = .open(flushPending: true)
        return [.startHeartbeat, .notifyOpen(reconnects: self.reconnects)]
    }

    /// A dial failed, or an open connection reported an error (a protocol violation by
    /// the peer, followed by ``closed(_:)``).
    public mutating func failed(_ error: ConnectionError) -> [Action] {
        switch self.phase {
        case .dialing:
            return self.lost(Self.report(for: error), error: error, retryForbidden: self.forbidsRetry(error))
        case .open, .closing:
            return [.reportError(error)]
        case .idle, .reconnecting, .closed:
            // Late news from a dial that was abandoned.
            return []
        }
    }

    /// A connection that had opened ended (the transport's single close report).
    public mutating func closed(_ info: CloseInfo) -> [Action] {
        switch self.phase {
        case .open:
            let report = CloseReport(code: info.code, reason: info.reason, clean: info.clean, by: info.initiator, willReconnect: false)
            return [.stopHeartbeat] + self.lost(report, error: nil, retryForbidden: self.forbidsRetry(info))
        case .closing(let closing):
            var report = CloseReport(code: info.code, reason: info.reason, clean: info.clean, by: info.initiator, willReconnect: false)
            if closing.heartbeatDead {
                report = CloseReport(
                    code: CloseCode.abnormal, reason: "heartbeat timeout", clean: false, by: .network, willReconnect: false
                )
            }
            switch closing.then {
            case .finish:
                self.phase = .closed
                return [.reportClose(report)]
            case .retry:
                return self.lost(report, error: nil, retryForbidden: false)
            case .redial:
                self.backoff.reset()
                self.phase = .dialing(fresh: false)
                report.willReconnect = true
                // Dial first: the close handlers may call back, and must find the dial
                // already under way rather than a stale one to come.
                return [.dial(attempt: 0), .reportClose(report)]
            }
        case .idle, .dialing, .reconnecting, .closed:
            return []
        }
    }

    /// The script called `c:close(code, reason)`: close for good, dropping the queue.
    public mutating func closeRequested(code: UInt16, reason: String) -> [Action] {
        let final = CloseReport(code: CloseCode.abnormal, reason: "", clean: false, by: .local, willReconnect: false)
        switch self.phase {
        case .idle:
            self.phase = .closed
            return [.dropQueue, .reportClose(final)]
        case .dialing:
            self.phase = .closed
            return [.abortDial, .dropQueue, .reportClose(final)]
        case .open:
            self.phase = .closing(Closing(heartbeatDead: false, then: .finish))
            return [.stopHeartbeat, .dropQueue, .sendClose(code: code, reason: reason)]
        case .closing(var closing):
            guard closing.then != .finish else { return [] }
            closing.then = .finish
            self.phase = .closing(closing)
            return [.dropQueue]
        case .reconnecting(let retry):
            self.phase = .closed
            return retry.cancellingTimer + [.dropQueue, .reportClose(final)]
        case .closed:
            return []
        }
    }

    /// The script called `c:reconnect()` with no argument: dial now, with a fresh attempt
    /// count. An open connection is closed first (code 1000); a closed one is revived.
    public mutating func reconnectRequested() -> [Action] {
        switch self.phase {
        case .idle:
            return self.start()
        case .dialing:
            return []
        case .open:
            self.phase = .closing(Closing(heartbeatDead: false, then: .redial))
            return [.stopHeartbeat, .sendClose(code: CloseCode.normal, reason: "reconnect")]
        case .closing(var closing):
            closing.then = .redial
            self.phase = .closing(closing)
            return []
        case .reconnecting(let retry):
            self.backoff.reset()
            self.phase = .dialing(fresh: false)
            return retry.cancellingTimer + [.dial(attempt: 0)]
        case .closed:
            self.backoff.reset()
            self.phase = .dialing(fresh: true)
            return [.dial(attempt: 0)]
        }
    }

    /// The script called `c:reconnect(opts)` (a policy) or `c:reconnect(false)` (nil).
    /// The attempt count is kept; turning reconnection off while waiting to retry closes
    /// the connection for good.
    public mutating func reconnectPolicyChanged(_ policy: ReconnectPolicy?) -> [Action] {
        if let policy { self.backoff.policy = policy }
        self.reconnectEnabled = policy != nil
        guard policy == nil, case .reconnecting(let retry) = self.phase else { return [] }
        return retry.cancellingTimer + self.giveUp(after: retry.loss)
    }

    /// The `on_reconnect` hook answered (or there is none: ``ReconnectAnswer/proceed``).
    public mutating func reconnectHookAnswered(_ answer: ReconnectAnswer) -> [Action] {
        guard case .reconnecting(var retry) = self.phase, retry.step == .awaitingAnswer else { return [] }
        switch answer {
        case .proceed:
            break
        case .delay(let other):
            retry.delay = Swift.max(other, .zero)
        case .stop:
            return self.giveUp(after: retry.loss)
        }
        retry.step = .waitingForTimer
        self.phase = .reconnecting(retry)
        return [.startRetryTimer(delay: retry.delay)]
    }

    /// The retry timer fired.
    public mutating func retryTimerFired() -> [Action] {
        guard case .reconnecting(let retry) = self.phase, retry.step == .waitingForTimer else { return [] }
        self.phase = .dialing(fresh: false)
        return [.dial(attempt: retry.attempt)]
    }

    /// The ``HeartbeatMonitor`` declared the peer dead: drop the connection without a
    /// handshake and, once the transport reports it gone, reconnect as after any loss.
    public mutating func heartbeatFailed() -> [Action] {
        guard case .open = self.phase else { return [] }
        self.phase = .closing(Closing(heartbeatDead: true, then: .retry))
        return [.stopHeartbeat, .dropConnection]
    }

    /// The steps that had to wait for the script's handlers: call after performing every
    /// list of actions. Flushes the queue after `on_open`, asks the hook after `on_close`
    /// or `on_error`; returns nothing when nothing waits, or when the handlers changed
    /// the course (closed the connection, say).
    public mutating func afterHandlers() -> [Action] {
        switch self.phase {
        case .open(flushPending: true):
            self.phase = .open(flushPending: false)
            return [.flushQueue]
        case .reconnecting(var retry) where retry.step == .askHook:
            retry.step = .awaitingAnswer
            self.phase = .reconnecting(retry)
            return [.askReconnectHook(attempt: retry.attempt, delay: retry.delay)]
        default:
            return []
        }
    }

    // MARK: - Decisions

    /// After a loss: plan the next attempt, or close for good. `report` describes the
    /// loss; `error` is set when a dial failed (no close to report unless it is final).
    private mutating func lost(_ report: CloseReport, error: ConnectionError?, retryForbidden: Bool) -> [Action] {
        let actions: [Action] = error.map { [.reportError($0)] } ?? []
        guard self.reconnectEnabled, !retryForbidden, let next = self.backoff.next() else {
            return actions + self.giveUp(after: report)
        }
        self.phase = .reconnecting(Retry(step: .askHook, attempt: next.attempt, delay: next.delay, loss: report))
        guard error == nil else { return actions }
        var willReconnect = report
        willReconnect.willReconnect = true
        return actions + [.reportClose(willReconnect)]
    }

    private mutating func giveUp(after loss: CloseReport) -> [Action] {
        self.phase = .closed
        var final = loss
        final.willReconnect = false
        return [.dropQueue, .reportClose(final)]
    }

    private func forbidsRetry(_ info: CloseInfo) -> Bool {
        info.initiator == .peer && self.backoff.policy.stops(afterPeerClose: info.code)
    }

    private func forbidsRetry(_ error: ConnectionError) -> Bool {
        guard error.step == .handshake, let status = error.httpStatus else { return false }
        return (400..<500).contains(status) && !self.backoff.policy.retryHTTP
    }

    /// A failed dial as `on_close` tells it when it is final: no handshake took place,
    /// and the reason is the error, so the script sees why it gave up.
    private static func report(for error: ConnectionError) -> CloseReport {
        CloseReport(
            code: CloseCode.abnormal,
            reason: error.description,
            clean: false,
            by: error.step == .handshake ? .peer : .network,
            willReconnect: false
        )
    }
}
