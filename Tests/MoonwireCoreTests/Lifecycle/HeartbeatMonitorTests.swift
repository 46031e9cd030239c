import NIOCore
import Testing

@testable import MoonwireCore

private typealias Configuration = HeartbeatMonitor.Configuration

private let origin = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

/// The instant `seconds` after the connection opened.
private func t(_ seconds: Double) -> NIODeadline {
    origin + .nanoseconds(Int64((seconds * 1e9).rounded()))
}

private func seconds(_ value: Double) -> TimeAmount {
    .nanoseconds(Int64((value * 1e9).rounded()))
}

/// A monitor started at `t(0)`.
private func started(_ configuration: Configuration?) -> HeartbeatMonitor {
    var monitor = HeartbeatMonitor(configuration)
    monitor.start(at: t(0))
    return monitor
}

private let client = Configuration(interval: .seconds(30), timeout: .seconds(10))

/// Fires the caller's timer at every deadline up to `end`, as the connection would, and
/// answers each ping `rtt` later when given. Returns when each action happened.
private func drive(
    _ monitor: inout HeartbeatMonitor,
    until end: NIODeadline,
    answeringAfter rtt: TimeAmount? = nil
) -> [(at: NIODeadline, action: HeartbeatMonitor.Action)] {
    var log: [(at: NIODeadline, action: HeartbeatMonitor.Action)] = []
    var pendingPong: (at: NIODeadline, payload: [UInt8])?
    while true {
        let next = monitor.nextDeadline
        // At the same instant the timer wins: a pong exactly `timeout` late is too late.
        if let pong = pendingPong, pong.at <= end, next.map({ pong.at < $0 }) ?? true {
            monitor.didReceivePong(payload: pong.payload, at: pong.at)
            pendingPong = nil
            continue
        }
        guard let deadline = next, deadline <= end else { break }
        guard let action = monitor.tick(at: deadline) else { continue }
        log.append((deadline, action))
        if case .sendPing(let payload) = action, let rtt {
            pendingPong = (deadline + rtt, payload)
        }
    }
    return log
}

extension LifecycleTests {
    @Suite struct HeartbeatMonitorTests {
        @Test func defaultsAreSpecs() {
            let configuration = Configuration()
            #expect(configuration.interval == .seconds(30))
            #expect(configuration.timeout == .seconds(10))
            #expect(configuration.probe == .ping)
            #expect(configuration.watch == .outboundSilence)
        }

        @Test func nothingIsWatchedBeforeOpenOrAfterStop() {
            var monitor = HeartbeatMonitor(client)
            #expect(monitor.nextDeadline == nil)
            #expect(monitor.tick(at: t(100)) == nil)
            monitor.start(at: t(0))
            #expect(monitor.nextDeadline == t(30))
            monitor.stop()
            #expect(monitor.nextDeadline == nil)
            #expect(monitor.tick(at: t(100)) == nil)
        }

        @Test func pingAfterAnIntervalOfOutboundSilence() {
            var monitor = started(client)
            #expect(monitor.nextDeadline == t(30))
            #expect(monitor.tick(at: t(29.999)) == nil)
            guard case .sendPing(let payload)? = monitor.tick(at: t(30)) else {
                Issue.record("no ping at the interval")
                return
            }
            #expect(!payload.isEmpty && payload.count <= 125)
            #expect(monitor.nextDeadline == t(40))
        }

        @Test(arguments: [
            ([5.0], 35.0),
            ([20.0], 50.0),
            ([10.0, 25.0, 29.9], 59.9),
            ([29.999], 59.999),
        ])
        func trafficBothWaysPostponesThePing(sends: [Double], firstPing: Double) {
            var monitor = started(client)
            for s in sends {
                monitor.didSend(at: t(s))
                monitor.didReceiveMessage(at: t(s))
            }
            #expect(monitor.nextDeadline == t(firstPing))
            // A timer armed before the sends fires early and finds nothing due.
            #expect(monitor.tick(at: t(30)) == nil)
            #expect(monitor.tick(at: t(firstPing)) != nil)
        }

        /// The half-open case: we keep sending, the peer went quiet. Without a probe on
        /// its silence the dead connection would go unnoticed for as long as we send.
        @Test func aSteadySenderToAQuietPeerStillProbes() {
            var monitor = started(client)
            for s in stride(from: 0.5, to: 30, by: 0.5) { monitor.didSend(at: t(s)) }
            #expect(monitor.nextDeadline == t(30))
            #expect(monitor.tick(at: t(30)) != nil)
            for s in stride(from: 30.5, to: 40, by: 0.5) { monitor.didSend(at: t(s)) }
            #expect(monitor.tick(at: t(40)) == .declareDead)
        }

        @Test func receivingDoesNotPostponeAClientsPing() {
            var monitor = started(client)
            monitor.didReceiveMessage(at: t(20))
            monitor.didReceivePing(at: t(25))
            #expect(monitor.nextDeadline == t(30))
            #expect(monitor.tick(at: t(30)) != nil)
        }

        @Test func deadAfterIntervalPlusTimeoutWithoutPong() {
            var monitor = started(client)
            let log = drive(&monitor, until: t(3_600))
            #expect(log.map(\.at) == [t(30), t(40)])
            #expect(log.last?.action == .declareDead)
            #expect(monitor.nextDeadline == nil)
            #expect(monitor.tick(at: t(100)) == nil)
            #expect(monitor.lastRTT == nil)
        }

        @Test func sendingWhileAPingIsOutDoesNotSaveIt() {
            var monitor = started(client)
            _ = monitor.tick(at: t(30))
            monitor.didSend(at: t(35))
            monitor.didReceiveMessage(at: t(36))
            #expect(monitor.tick(at: t(39.99)) == nil)
            #expect(monitor.tick(at: t(40)) == .declareDead)
        }

        @Test func aPongInTimeKeepsItAliveAndTimesTheRoundTrip() {
            var monitor = started(client)
            guard case .sendPing(let payload)? = monitor.tick(at: t(30)) else {
                Issue.record("no ping")
                return
            }
            monitor.didReceivePong(payload: payload, at: t(30.25))
            #expect(monitor.lastRTT == .milliseconds(250))
            #expect(monitor.nextDeadline == t(60))
            #expect(monitor.tick(at: t(40)) == nil)
            guard case .sendPing(let second)? = monitor.tick(at: t(60)) else {
                Issue.record("no second ping")
                return
            }
            #expect(second != payload)
            monitor.didReceivePong(payload: second, at: t(69.999))
            #expect(monitor.lastRTT == seconds(9.999))
            #expect(monitor.tick(at: t(70)) == nil)
        }

        @Test(arguments: [0.001, 0.5, 9.99])
        func anIdleConnectionPingsEveryInterval(rtt: Double) {
            var monitor = started(client)
            let log = drive(&monitor, until: t(300), answeringAfter: seconds(rtt))
            #expect(log.map(\.at) == stride(from: 30.0, through: 300, by: 30).map(t))
            #expect(monitor.lastRTT == seconds(rtt))
        }

        @Test func aPongTooLateIsTooLate() {
            var monitor = started(client)
            let log = drive(&monitor, until: t(300), answeringAfter: .seconds(10))
            #expect(log.map(\.at) == [t(30), t(40)])
            #expect(log.last?.action == .declareDead)
        }

        @Test func onlyThePongToTheProbeAnswersIt() {
            var monitor = started(client)
            guard case .sendPing(let payload)? = monitor.tick(at: t(30)) else {
                Issue.record("no ping")
                return
            }
            monitor.didReceivePong(payload: Array("the script's own ping".utf8), at: t(31))
            monitor.didReceivePong(payload: [], at: t(32))
            monitor.didReceivePong(payload: payload.dropLast(), at: t(33))
            #expect(monitor.lastRTT == nil)
            #expect(monitor.tick(at: t(40)) == .declareDead)
        }

        @Test func aPongFromBeforeAReconfigurationIsStale() {
            var monitor = started(client)
            guard case .sendPing(let old)? = monitor.tick(at: t(30)) else {
                Issue.record("no ping")
                return
            }
            monitor.reconfigure(Configuration(interval: .seconds(5), timeout: .seconds(2)), at: t(31))
            #expect(monitor.nextDeadline == t(36))
            guard case .sendPing(let new)? = monitor.tick(at: t(36)) else {
                Issue.record("no ping after reconfiguring")
                return
            }
            monitor.didReceivePong(payload: old, at: t(37))
            #expect(monitor.lastRTT == nil)
            #expect(monitor.tick(at: t(38)) == .declareDead)
            #expect(new != old)
        }

        @Test func turnedOffAndOnAtRunTime() {
            var monitor = started(client)
            _ = monitor.tick(at: t(30))
            monitor.reconfigure(nil, at: t(35))
            #expect(monitor.configuration == nil)
            #expect(monitor.nextDeadline == nil)
            #expect(monitor.tick(at: t(1_000)) == nil)
            monitor.reconfigure(client, at: t(1_000))
            #expect(monitor.nextDeadline == t(1_030))
        }

        @Test func reconfiguringAClosedConnectionWaitsForTheOpen() {
            var monitor = HeartbeatMonitor(nil)
            monitor.reconfigure(client, at: t(5))
            #expect(monitor.nextDeadline == nil)
            monitor.start(at: t(10))
            #expect(monitor.nextDeadline == t(40))
        }

        @Test func aLateTimerProbesNowAndWaitsTheFullTimeout() {
            var monitor = started(client)
            #expect(monitor.tick(at: t(500)) != nil)
            #expect(monitor.nextDeadline == t(510))
        }

        @Test func aRestartAfterReconnectForgetsTheOldProbe() {
            var monitor = started(client)
            _ = monitor.tick(at: t(30))
            monitor.stop()
            monitor.start(at: t(100))
            #expect(monitor.nextDeadline == t(130))
        }

        // MARK: Application-level heartbeat

        @Test func aMessageAnsweredByAnyInboundMessage() {
            var monitor = started(Configuration(interval: .seconds(30), timeout: .seconds(10), probe: .message(reply: .anyMessage)))
            #expect(monitor.tick(at: t(30)) == .sendMessage)
            monitor.didReceivePong(payload: [], at: t(31))
            #expect(monitor.nextDeadline == t(40))
            monitor.didReceiveMessage(at: t(32))
            #expect(monitor.nextDeadline == t(60))
            // Any message is no measure of the round trip.
            #expect(monitor.lastRTT == nil)
            #expect(monitor.tick(at: t(60)) == .sendMessage)
            #expect(monitor.tick(at: t(70)) == .declareDead)
        }

        @Test func aMessageAnsweredOnlyByItsReply() {
            var monitor = started(Configuration(interval: .seconds(30), timeout: .seconds(10), probe: .message(reply: .matching)))
            monitor.didReceiveReply(at: t(5))
            #expect(monitor.lastRTT == nil)
            #expect(monitor.tick(at: t(30)) == .sendMessage)
            monitor.didReceiveMessage(at: t(31))
            #expect(monitor.nextDeadline == t(40))
            monitor.didReceiveReply(at: t(32))
            #expect(monitor.lastRTT == .seconds(2))
            #expect(monitor.nextDeadline == t(60))
            #expect(monitor.tick(at: t(60)) == .sendMessage)
            monitor.didReceiveMessage(at: t(65))
            #expect(monitor.tick(at: t(70)) == .declareDead)
        }

        @Test func trafficPostponesTheHeartbeatMessage() {
            var monitor = started(Configuration(probe: .message(reply: .anyMessage)))
            monitor.didSend(at: t(25))
            monitor.didReceiveMessage(at: t(25))
            #expect(monitor.tick(at: t(30)) == nil)
            #expect(monitor.tick(at: t(55)) == .sendMessage)
        }

        // MARK: Server side: the peer's silence

        private static let server = Configuration(interval: .seconds(10), timeout: .seconds(5), watch: .inboundSilence)

        @Test func aServerPingsASilentPeerAndDropsIt() {
            var monitor = started(Self.server)
            monitor.didSend(at: t(8))
            #expect(monitor.nextDeadline == t(10))
            let log = drive(&monitor, until: t(100))
            #expect(log.map(\.at) == [t(10), t(15)])
            #expect(log.last?.action == .declareDead)
        }

        @Test func anythingFromThePeerKeepsItAlive() {
            var monitor = started(Self.server)
            monitor.didReceiveMessage(at: t(4))
            #expect(monitor.nextDeadline == t(14))
            monitor.didReceivePing(at: t(9))
            #expect(monitor.nextDeadline == t(19))
            guard case .sendPing(let payload)? = monitor.tick(at: t(19)) else {
                Issue.record("no ping")
                return
            }
            monitor.didReceiveMessage(at: t(20))
            #expect(monitor.nextDeadline == t(30))
            _ = monitor.tick(at: t(30))
            monitor.didReceivePong(payload: Array("unsolicited".utf8), at: t(31))
            #expect(monitor.nextDeadline == t(41))
            #expect(monitor.lastRTT == nil)
            _ = monitor.tick(at: t(41))
            monitor.didReceivePing(at: t(42))
            #expect(monitor.nextDeadline == t(52))
            #expect(payload.count > 0)
        }

        @Test func aServerTimesItsOwnPings() {
            var monitor = started(Self.server)
            let log = drive(&monitor, until: t(60), answeringAfter: .milliseconds(3))
            #expect(log.map(\.at) == [t(10), t(20.003), t(30.006), t(40.009), t(50.012)])
            #expect(monitor.lastRTT == .milliseconds(3))
        }

        @Test func aServerWithoutProbeDropsAfterIntervalPlusTimeoutOfSilence() {
            var monitor = started(Configuration(interval: .seconds(10), timeout: .seconds(5), probe: nil, watch: .inboundSilence))
            #expect(monitor.tick(at: t(10)) == nil)
            #expect(monitor.nextDeadline == t(15))
            monitor.didReceiveMessage(at: t(12))
            #expect(monitor.nextDeadline == t(22))
            let log = drive(&monitor, until: t(100))
            #expect(log.map(\.at) == [t(27)])
            #expect(log.last?.action == .declareDead)
        }

        @Test func aServerCountsRepliesAndMessagesAlike() {
            var monitor = started(Configuration(interval: .seconds(10), timeout: .seconds(5), probe: .message(reply: .matching), watch: .inboundSilence))
            #expect(monitor.tick(at: t(10)) == .sendMessage)
            monitor.didReceiveMessage(at: t(11))
            #expect(monitor.nextDeadline == t(21))
            #expect(monitor.tick(at: t(21)) == .sendMessage)
            monitor.didReceiveReply(at: t(22))
            #expect(monitor.lastRTT == .seconds(1))
            #expect(monitor.nextDeadline == t(32))
        }
    }
}
