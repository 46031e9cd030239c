import NIOCore
import Testing

@testable import MoonwireCore

private typealias Action = ConnectionLifecycle.Action
private typealias Report = ConnectionLifecycle.CloseReport

private let dropped = CloseInfo(code: 1006, reason: "", clean: false, initiator: .network)
private let refused = ConnectionError(step: .connect, message: "connection refused (127.0.0.1:9)")

private func peer(_ code: UInt16, _ reason: String = "") -> CloseInfo {
    CloseInfo(code: code, reason: reason, clean: true, initiator: .peer)
}

private func http(_ status: Int) -> ConnectionError {
    ConnectionError(step: .handshake, message: "HTTP \(status)", httpStatus: status)
}

private func report(_ info: CloseInfo, willReconnect: Bool) -> Action {
    .reportClose(Report(code: info.code, reason: info.reason, clean: info.clean, by: info.initiator, willReconnect: willReconnect))
}

/// What a script's `c:close()` reports when no connection was open to close.
private let closedByScript = Action.reportClose(Report(code: 1006, reason: "", clean: false, by: .local, willReconnect: false))

/// A lifecycle without jitter, so delays are the policy's base delays.
private func lifecycle(_ policy: ReconnectPolicy? = ReconnectPolicy()) -> ConnectionLifecycle {
    ConnectionLifecycle(reconnect: policy) { 0.5 }
}

/// Started and opened, with the open handlers done.
private func openLifecycle(_ policy: ReconnectPolicy? = ReconnectPolicy()) -> ConnectionLifecycle {
    var life = lifecycle(policy)
    _ = life.start()
    _ = life.opened()
    _ = life.afterHandlers()
    return life
}

/// From a planned retry (the hook not yet asked) to the retry's dial; returns the delay.
private func retry(_ life: inout ConnectionLifecycle, expecting attempt: Int) -> TimeAmount? {
    guard case .askReconnectHook(let asked, let delay)? = life.afterHandlers().first, asked == attempt else { return nil }
    #expect(life.reconnectHookAnswered(.proceed) == [.startRetryTimer(delay: delay)])
    #expect(life.retryTimerFired() == [.dial(attempt: attempt)])
    return delay
}

extension LifecycleTests {
    @Suite struct ConnectionLifecycleTests {
        @Test func stateNamesAreTheScriptsStrings() {
            #expect(ConnectionLifecycle.State.allCases.map(\.rawValue) == ["connecting", "open", "closing", "closed", "reconnecting"])
        }

        @Test func firstOpenFlushesAfterTheOpenHandlers() {
            var life = lifecycle()
            #expect(life.state == .connecting)
            #expect(life.sendRoute == .enqueue)
            #expect(life.start() == [.dial(attempt: 0)])
            #expect(life.start() == [])
            #expect(life.state == .connecting)
            #expect(life.opened() == [.startHeartbeat, .notifyOpen(reconnects: 0)])
            #expect(life.state == .open)
            // Inside on_open sends go straight out, ahead of the queue.
            #expect(life.sendRoute == .send)
            #expect(life.afterHandlers() == [.flushQueue])
            #expect(life.afterHandlers() == [])
            #expect(life.reconnects == 0)
            #expect(life.isAlive)
        }

        @Test func aDroppedConnectionReconnectsAndCountsIt() {
            var life = openLifecycle()
            #expect(life.closed(dropped) == [.stopHeartbeat, report(dropped, willReconnect: true)])
            #expect(life.state == .reconnecting)
            #expect(life.sendRoute == .enqueue)
            #expect(life.afterHandlers() == [.askReconnectHook(attempt: 1, delay: .seconds(1))])
            #expect(life.afterHandlers() == [])
            #expect(life.reconnectHookAnswered(.proceed) == [.startRetryTimer(delay: .seconds(1))])
            #expect(life.state == .reconnecting)
            #expect(life.retryTimerFired() == [.dial(attempt: 1)])
            #expect(life.retryTimerFired() == [])
            #expect(life.state == .reconnecting)
            #expect(life.opened() == [.startHeartbeat, .notifyOpen(reconnects: 1)])
            #expect(life.afterHandlers() == [.flushQueue])
            #expect(life.reconnects == 1)

            _ = life.closed(dropped)
            #expect(retry(&life, expecting: 1) == .seconds(1))
            _ = life.opened()
            #expect(life.reconnects == 2)
        }

        @Test func handshake503TwiceThenAcceptedResetsTheCount() {
            var life = lifecycle()
            _ = life.start()
            #expect(life.failed(http(503)) == [.reportError(http(503))])
            #expect(life.state == .reconnecting)
            #expect(retry(&life, expecting: 1) == .seconds(1))
            #expect(life.failed(http(503)) == [.reportError(http(503))])
            #expect(retry(&life, expecting: 2) == .seconds(2))
            // The first successful open is not a reconnect, however many dials it took.
            #expect(life.opened() == [.startHeartbeat, .notifyOpen(reconnects: 0)])
            _ = life.afterHandlers()
            _ = life.closed(dropped)
            #expect(retry(&life, expecting: 1) == .seconds(1))
        }

        @Test(arguments: [400, 401, 403, 404, 426, 429, 499])
        func handshake4xxStops(status: Int) {
            var life = lifecycle()
            _ = life.start()
            let final = Report(code: 1006, reason: "handshake: HTTP \(status)", clean: false, by: .peer, willReconnect: false)
            #expect(life.failed(http(status)) == [.reportError(http(status)), .dropQueue, .reportClose(final)])
            #expect(life.state == .closed)
            #expect(!life.isAlive)
            #expect(life.sendRoute == .refuse)
            #expect(life.afterHandlers() == [])
        }

        @Test(arguments: [301, 500, 502, 503, 504])
        func otherHandshakeRejectionsRetry(status: Int) {
            var life = lifecycle()
            _ = life.start()
            #expect(life.failed(http(status)) == [.reportError(http(status))])
            #expect(life.afterHandlers() == [.askReconnectHook(attempt: 1, delay: .seconds(1))])
        }

        @Test func retryHTTPRetries4xx() {
            var life = lifecycle(ReconnectPolicy(retryHTTP: true))
            _ = life.start()
            #expect(life.failed(http(401)) == [.reportError(http(401))])
            #expect(life.state == .reconnecting)
        }

        @Test func aHandshakeWithoutStatusRetries() {
            var life = lifecycle()
            _ = life.start()
            let badAccept = ConnectionError(step: .handshake, message: "bad Sec-WebSocket-Accept")
            #expect(life.failed(badAccept) == [.reportError(badAccept)])
            #expect(life.state == .reconnecting)
        }

        struct CloseCase: Sendable, CustomTestStringConvertible {
            var info: CloseInfo
            var onNormalClose: Bool
            var stopCodes: Set<UInt16> = []
            var willReconnect: Bool
            var testDescription: String { "\(info) onNormalClose=\(onNormalClose) stopCodes=\(stopCodes.sorted())" }
        }

        @Test(arguments: [
            CloseCase(info: peer(1000, "bye"), onNormalClose: false, willReconnect: false),
            CloseCase(info: peer(1000, "bye"), onNormalClose: true, willReconnect: true),
            CloseCase(info: peer(1001, "restart"), onNormalClose: false, willReconnect: true),
            // A server restart says 1000 or 1001: both come back by default.
            CloseCase(info: peer(1000, "restart"), onNormalClose: ReconnectPolicy().onNormalClose, willReconnect: true),
            CloseCase(info: peer(1012, "service restart"), onNormalClose: true, willReconnect: true),
            // "Do not come back": always 1003 and 1008, and the script's stop codes.
            CloseCase(info: peer(1008, "banned"), onNormalClose: true, willReconnect: false),
            CloseCase(info: peer(1003, "unsupported"), onNormalClose: true, willReconnect: false),
            CloseCase(info: peer(4001, "logged in elsewhere"), onNormalClose: true, stopCodes: [4001], willReconnect: false),
            CloseCase(info: peer(4002, "other"), onNormalClose: true, stopCodes: [4001], willReconnect: true),
            // Our own 1008 (after a policy problem of the peer's) is not the peer's verdict.
            CloseCase(info: CloseInfo(code: 1008, reason: "too slow", clean: true, initiator: .local), onNormalClose: true, willReconnect: true),
            CloseCase(info: peer(1005), onNormalClose: false, willReconnect: true),
            CloseCase(info: peer(1011, "oops"), onNormalClose: false, willReconnect: true),
            CloseCase(info: peer(4000, "app"), onNormalClose: false, willReconnect: true),
            CloseCase(info: dropped, onNormalClose: false, willReconnect: true),
            CloseCase(info: CloseInfo(code: 1002, reason: "bad opcode", clean: false, initiator: .local), onNormalClose: false, willReconnect: true),
            CloseCase(info: CloseInfo(code: 1009, reason: "too big", clean: false, initiator: .local), onNormalClose: true, willReconnect: true),
        ])
        func closesOfAnOpenConnection(_ c: CloseCase) {
            var life = openLifecycle(ReconnectPolicy(onNormalClose: c.onNormalClose, stopCodes: c.stopCodes))
            let actions = life.closed(c.info)
            if c.willReconnect {
                #expect(actions == [.stopHeartbeat, report(c.info, willReconnect: true)])
                #expect(life.state == .reconnecting)
            } else {
                #expect(actions == [.stopHeartbeat, .dropQueue, report(c.info, willReconnect: false)])
                #expect(life.state == .closed)
            }
        }

        @Test func deliberateCloseWhileOpenStopsForGood() {
            var life = openLifecycle()
            #expect(life.closeRequested(code: 1000, reason: "bye") == [.stopHeartbeat, .dropQueue, .sendClose(code: 1000, reason: "bye")])
            #expect(life.state == .closing)
            #expect(life.sendRoute == .refuse)
            #expect(life.closeRequested(code: 1000, reason: "again") == [])
            let echoed = CloseInfo(code: 1000, reason: "bye", clean: true, initiator: .local)
            #expect(life.closed(echoed) == [report(echoed, willReconnect: false)])
            #expect(life.state == .closed)
            #expect(!life.isAlive)
            // Nothing brings it back but the script.
            #expect(life.retryTimerFired() == [])
            #expect(life.reconnectHookAnswered(.proceed) == [])
            #expect(life.failed(refused) == [])
            #expect(life.closed(dropped) == [])
            #expect(life.heartbeatFailed() == [])
            #expect(life.afterHandlers() == [])
            #expect(life.closeRequested(code: 1000, reason: "") == [])
        }

        @Test func deliberateCloseThatTimesOutStillDoesNotReconnect() {
            var life = openLifecycle()
            _ = life.closeRequested(code: 1000, reason: "bye")
            let timedOut = CloseInfo(code: 1006, reason: "", clean: false, initiator: .local)
            #expect(life.closed(timedOut) == [report(timedOut, willReconnect: false)])
            #expect(life.state == .closed)
        }

        @Test func deliberateCloseWhileWaitingToRetryDropsTheQueue() {
            var life = openLifecycle()
            _ = life.closed(dropped)
            _ = life.afterHandlers()
            _ = life.reconnectHookAnswered(.proceed)
            #expect(life.closeRequested(code: 1000, reason: "") == [.cancelRetryTimer, .dropQueue, closedByScript])
            #expect(life.state == .closed)
            #expect(life.retryTimerFired() == [])
        }

        @Test func closeFromOnCloseCancelsTheHookQuestion() {
            var life = openLifecycle()
            _ = life.closed(dropped)
            // The on_close handler calls c:close() before the hook was asked.
            #expect(life.closeRequested(code: 1000, reason: "") == [.dropQueue, closedByScript])
            #expect(life.afterHandlers() == [])
        }

        @Test func closeFromTheHookWins() {
            var life = openLifecycle()
            _ = life.closed(dropped)
            _ = life.afterHandlers()
            #expect(life.closeRequested(code: 1000, reason: "") == [.dropQueue, closedByScript])
            #expect(life.reconnectHookAnswered(.proceed) == [])
        }

        @Test func closeWhileDialingAbandonsTheDial() {
            var life = lifecycle()
            _ = life.start()
            #expect(life.closeRequested(code: 1000, reason: "") == [.abortDial, .dropQueue, closedByScript])
            #expect(life.state == .closed)
            #expect(life.opened() == [.dropConnection])
            #expect(life.failed(refused) == [])
            #expect(life.state == .closed)
        }

        @Test func closeBeforeStart() {
            var life = lifecycle()
            #expect(life.closeRequested(code: 1000, reason: "") == [.dropQueue, closedByScript])
            #expect(life.start() == [])
        }

        @Test func closeInsideOnOpenSkipsTheFlush() {
            var life = lifecycle()
            _ = life.start()
            _ = life.opened()
            #expect(life.closeRequested(code: 1000, reason: "no") == [.stopHeartbeat, .dropQueue, .sendClose(code: 1000, reason: "no")])
            #expect(life.afterHandlers() == [])
        }

        @Test func attemptsUsedUpAfterDialFailures() {
            var life = lifecycle(ReconnectPolicy(attempts: 3))
            #expect(life.start() == [.dial(attempt: 0)])
            var delays: [TimeAmount] = []
            for attempt in 1...3 {
                #expect(life.failed(refused) == [.reportError(refused)])
                delays.append(retry(&life, expecting: attempt) ?? .zero)
            }
            #expect(delays == [.seconds(1), .seconds(2), .seconds(4)])
            let final = Report(code: 1006, reason: "connect: connection refused (127.0.0.1:9)", clean: false, by: .network, willReconnect: false)
            #expect(life.failed(refused) == [.reportError(refused), .dropQueue, .reportClose(final)])
            #expect(life.state == .closed)
        }

        @Test func aLossThatNeverRecoversEndsWithOneFinalClose() {
            var life = openLifecycle(ReconnectPolicy(attempts: 2))
            #expect(life.closed(dropped) == [.stopHeartbeat, report(dropped, willReconnect: true)])
            _ = retry(&life, expecting: 1)
            #expect(life.failed(refused) == [.reportError(refused)])
            _ = retry(&life, expecting: 2)
            let actions = life.failed(refused)
            #expect(actions.last == .reportClose(Report(code: 1006, reason: refused.description, clean: false, by: .network, willReconnect: false)))
            #expect(life.state == .closed)
        }

        @Test func zeroAttemptsCloseAtOnce() {
            var life = openLifecycle(ReconnectPolicy(attempts: 0))
            #expect(life.closed(dropped) == [.stopHeartbeat, .dropQueue, report(dropped, willReconnect: false)])
        }

        @Test func withoutReconnectAFailedDialIsFinal() {
            var life = lifecycle(nil)
            #expect(life.reconnectPolicy == nil)
            _ = life.start()
            let actions = life.failed(refused)
            #expect(actions.count == 3)
            #expect(actions.first == .reportError(refused))
            #expect(life.state == .closed)
        }

        @Test func theHookStopsRetrying() {
            var life = openLifecycle()
            _ = life.closed(peer(1001, "restart"))
            _ = life.afterHandlers()
            #expect(life.reconnectHookAnswered(.stop) == [.dropQueue, report(peer(1001, "restart"), willReconnect: false)])
            #expect(life.state == .closed)
        }

        @Test func theHookStopsRetryingAfterAFailedDial() {
            var life = lifecycle()
            _ = life.start()
            _ = life.failed(http(503))
            _ = life.afterHandlers()
            let final = Report(code: 1006, reason: "handshake: HTTP 503", clean: false, by: .peer, willReconnect: false)
            #expect(life.reconnectHookAnswered(.stop) == [.dropQueue, .reportClose(final)])
        }

        @Test func theHookChangesTheDelay() {
            var life = openLifecycle()
            _ = life.closed(dropped)
            _ = life.afterHandlers()
            #expect(life.reconnectHookAnswered(.delay(.milliseconds(250))) == [.startRetryTimer(delay: .milliseconds(250))])
            #expect(life.reconnectHookAnswered(.stop) == [])
            #expect(life.retryTimerFired() == [.dial(attempt: 1)])
            // The next attempt still follows the schedule.
            _ = life.failed(refused)
            #expect(life.afterHandlers() == [.askReconnectHook(attempt: 2, delay: .seconds(2))])
            #expect(life.reconnectHookAnswered(.delay(.seconds(-3))) == [.startRetryTimer(delay: .zero)])
        }

        @Test func reconnectNowWhileWaiting() {
            var life = openLifecycle()
            _ = life.closed(dropped)
            _ = retry(&life, expecting: 1)
            _ = life.failed(refused)
            _ = life.afterHandlers()
            _ = life.reconnectHookAnswered(.proceed)
            #expect(life.reconnectRequested() == [.cancelRetryTimer, .dial(attempt: 0)])
            #expect(life.state == .reconnecting)
            #expect(life.reconnectRequested() == [])
            // A fresh count: the failure of this dial is attempt 1 again.
            _ = life.failed(refused)
            #expect(life.afterHandlers() == [.askReconnectHook(attempt: 1, delay: .seconds(1))])
            // Asked while the hook is being asked: dial now, and the answer comes too late.
            #expect(life.reconnectRequested() == [.dial(attempt: 0)])
            #expect(life.reconnectHookAnswered(.proceed) == [])
        }

        @Test func reconnectNowWhileOpenClosesThenDials() {
            var life = openLifecycle()
            #expect(life.reconnectRequested() == [.stopHeartbeat, .sendClose(code: 1000, reason: "reconnect")])
            #expect(life.state == .closing)
            #expect(life.sendRoute == .enqueue)
            let done = CloseInfo(code: 1000, reason: "reconnect", clean: true, initiator: .local)
            #expect(life.closed(done) == [.dial(attempt: 0), report(done, willReconnect: true)])
            #expect(life.state == .reconnecting)
            #expect(life.opened() == [.startHeartbeat, .notifyOpen(reconnects: 1)])
        }

        @Test func reconnectNowRevivesAClosedConnection() {
            var life = openLifecycle()
            _ = life.closeRequested(code: 1000, reason: "")
            _ = life.closed(CloseInfo(code: 1000, reason: "", clean: true, initiator: .local))
            #expect(life.reconnectRequested() == [.dial(attempt: 0)])
            #expect(life.state == .connecting)
            #expect(life.isAlive)
            #expect(life.sendRoute == .enqueue)
            #expect(life.opened() == [.startHeartbeat, .notifyOpen(reconnects: 1)])
        }

        @Test func reconnectNowBeforeStartStarts() {
            var life = lifecycle()
            #expect(life.reconnectRequested() == [.dial(attempt: 0)])
            #expect(life.state == .connecting)
        }

        @Test func reconnectAfterADeliberateCloseWasAsked() {
            var life = openLifecycle()
            _ = life.closeRequested(code: 1000, reason: "bye")
            #expect(life.reconnectRequested() == [])
            #expect(life.sendRoute == .enqueue)
            let done = CloseInfo(code: 1000, reason: "bye", clean: true, initiator: .local)
            #expect(life.closed(done) == [.dial(attempt: 0), report(done, willReconnect: true)])
        }

        @Test func turningReconnectOffWhileWaitingEndsIt() {
            var life = openLifecycle()
            _ = life.closed(dropped)
            _ = life.afterHandlers()
            _ = life.reconnectHookAnswered(.proceed)
            #expect(life.reconnectPolicyChanged(nil) == [.cancelRetryTimer, .dropQueue, report(dropped, willReconnect: false)])
            #expect(life.state == .closed)
        }

        @Test func turningReconnectOffWhileOpenAppliesToTheNextLoss() {
            var life = openLifecycle()
            #expect(life.reconnectPolicyChanged(nil) == [])
            #expect(life.closed(dropped) == [.stopHeartbeat, .dropQueue, report(dropped, willReconnect: false)])
        }

        @Test func aNewPolicyAppliesToTheNextDelay() {
            var life = openLifecycle()
            _ = life.closed(dropped)
            _ = retry(&life, expecting: 1)
            let policy = ReconnectPolicy(initial: .seconds(5), factor: 3, jitter: 0, attempts: nil)
            #expect(life.reconnectPolicyChanged(policy) == [])
            #expect(life.reconnectPolicy == policy)
            _ = life.failed(refused)
            #expect(life.afterHandlers() == [.askReconnectHook(attempt: 2, delay: .seconds(15))])
        }

        @Test func aPolicyTurnedBackOnRetries() {
            var life = openLifecycle(nil)
            #expect(life.reconnectPolicyChanged(ReconnectPolicy()) == [])
            #expect(life.closed(dropped) == [.stopHeartbeat, report(dropped, willReconnect: true)])
        }

        @Test func aDeadHeartbeatDropsAndReconnects() {
            var life = openLifecycle()
            #expect(life.heartbeatFailed() == [.stopHeartbeat, .dropConnection])
            #expect(life.state == .closing)
            #expect(life.sendRoute == .enqueue)
            #expect(life.heartbeatFailed() == [])
            // Whatever the transport calls its own drop, the script hears the documented words.
            let transport = CloseInfo(code: 1006, reason: "", clean: false, initiator: .local)
            let expected = Report(code: 1006, reason: "heartbeat timeout", clean: false, by: .network, willReconnect: true)
            #expect(life.closed(transport) == [.reportClose(expected)])
            #expect(life.state == .reconnecting)
            #expect(life.afterHandlers() == [.askReconnectHook(attempt: 1, delay: .seconds(1))])
        }

        @Test func aDeadHeartbeatThenCloseStays() {
            var life = openLifecycle()
            _ = life.heartbeatFailed()
            #expect(life.closeRequested(code: 1000, reason: "") == [.dropQueue])
            #expect(life.sendRoute == .refuse)
            let expected = Report(code: 1006, reason: "heartbeat timeout", clean: false, by: .network, willReconnect: false)
            #expect(life.closed(dropped) == [.reportClose(expected)])
            #expect(life.state == .closed)
        }

        @Test func aProtocolErrorWhileOpenIsReportedThenTheCloseDecides() {
            var life = openLifecycle()
            let violation = ConnectionError(step: .protocol, message: "bad opcode (closed with 1002)", closeCode: 1002)
            #expect(life.failed(violation) == [.reportError(violation)])
            #expect(life.state == .open)
            let closed = CloseInfo(code: 1002, reason: "bad opcode", clean: false, initiator: .local)
            #expect(life.closed(closed) == [.stopHeartbeat, report(closed, willReconnect: true)])
        }

        @Test func staleEventsAreIgnored() {
            var life = lifecycle()
            #expect(life.opened() == [.dropConnection])
            #expect(life.failed(refused) == [])
            #expect(life.closed(dropped) == [])
            #expect(life.retryTimerFired() == [])
            #expect(life.reconnectHookAnswered(.proceed) == [])
            #expect(life.heartbeatFailed() == [])
            _ = life.start()
            #expect(life.closed(dropped) == [])
            #expect(life.retryTimerFired() == [])
            #expect(life.state == .connecting)
            _ = life.opened()
            #expect(life.opened() == [.dropConnection])
            #expect(life.state == .open)
        }

        /// Any order of events keeps the promises the script relies on: `isAlive` is false
        /// exactly when closed, a close with `willReconnect == false` is reported exactly when
        /// the connection becomes closed, and nothing is reported while it stays closed.
        @Test func randomEventSequencesKeepTheInvariants() {
            var rng = SplitMix64(seed: 0x6d6f_6f6e)
            for _ in 0..<2_000 {
                let attempts = Int.random(in: 0...3, using: &rng)
                var life = ConnectionLifecycle(reconnect: ReconnectPolicy(attempts: attempts)) { 0.5 }
                for _ in 0..<40 {
                    let wasClosed = life.state == .closed
                    let actions: [Action]
                    switch Int.random(in: 0..<12, using: &rng) {
                    case 0: actions = life.start()
                    case 1: actions = life.opened()
                    case 2: actions = life.failed(Bool.random(using: &rng) ? refused : http(401))
                    case 3: actions = life.closed(Bool.random(using: &rng) ? dropped : peer(1000))
                    case 4: actions = life.closeRequested(code: 1000, reason: "")
                    case 5: actions = life.reconnectRequested()
                    case 6: actions = life.reconnectPolicyChanged(Bool.random(using: &rng) ? nil : ReconnectPolicy())
                    case 7: actions = life.reconnectHookAnswered(Bool.random(using: &rng) ? .proceed : .stop)
                    case 8: actions = life.retryTimerFired()
                    case 9: actions = life.heartbeatFailed()
                    default: actions = life.afterHandlers()
                    }
                    let finals = actions.filter {
                        if case .reportClose(let report) = $0 { return !report.willReconnect }
                        return false
                    }
                    #expect(life.isAlive == (life.state != .closed))
                    if !wasClosed && life.state == .closed {
                        #expect(finals.count == 1, "\(actions)")
                    } else {
                        #expect(finals.isEmpty, "\(actions)")
                    }
                    if wasClosed && life.state == .closed {
                        #expect(!actions.contains { if case .reportClose = $0 { true } else { false } })
                    }
                }
            }
        }
    }
}

/// A small seeded generator, so a failing random sequence can be replayed.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
