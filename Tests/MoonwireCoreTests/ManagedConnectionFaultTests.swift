import Foundation
import NIOCore
import Testing

@testable import MoonwireCore

/// Issue 4's fault tests: `ManagedConnection` against a `MessageServer` on loopback, with
/// the faults real networks produce. Every wait is for an event and has its own timeout;
/// the only sleeps are the short quiet periods that show something did *not* happen.
@Suite("ManagedConnection faults over loopback", .serialized, .timeLimit(.minutes(5)))
struct ManagedConnectionFaultTests {
    /// Retries fast, for ever unless `attempts` says otherwise.
    static func fast(attempts: Int? = nil) -> ReconnectPolicy {
        ReconnectPolicy(initial: .milliseconds(20), factor: 2, max: .milliseconds(100), jitter: 0.2, attempts: attempts)
    }

    static func text(_ string: String) -> ByteBuffer { ByteBuffer(string: string) }

    /// Whether `delay` is `base` spread by at most ±`jitter` (1 µs of rounding allowed).
    static func withinJitter(_ delay: TimeAmount, base: TimeAmount, jitter: Double) -> Bool {
        let d = Double(delay.nanoseconds), b = Double(base.nanoseconds)
        return d >= b * (1 - jitter) - 1000 && d <= b * (1 + jitter) + 1000
    }

    // MARK: 1. Server killed and restarted

    @Test func serverKilledAndRestartedOnTheSamePort() async throws {
        let first = try await FaultServer.start()
        let port = first.port
        let policy = ReconnectPolicy(initial: .milliseconds(50), factor: 2, max: .milliseconds(200), jitter: 0.2, attempts: nil)
        let client = try await FaultClient.start(first.url, configuration: FaultClient.configuration(reconnect: policy)) { c in
            // A "login" on every open: it must reach the server before the queued messages.
            c.onOpen = { connection, info in
                #expect(connection.send(Self.text("login \(info.reconnects)"), kind: .text) == .sent)
            }
        }
        try await first.wait("the first login") { $0.contains { $0.received?.text == "login 0" } }

        // Kill the server: its peers get 1001, the port stops listening.
        try await first.stop()
        try await client.wait("the loss") { $0.contains { $0.closeReport != nil } }
        let sentWhileDown = try await client.onLoop {
            (1...5).map { client.connection.send(Self.text("down \($0)"), kind: .text) }
        }
        #expect(sentWhileDown == Array(repeating: .queued, count: 5))
        // The client really retries against a dead port before the restart.
        try await client.wait("a refused dial") { $0.contains { $0.failure != nil } }
        #expect(try await client.onLoop { (client.connection.state, client.connection.stats.queued) } == ("reconnecting", 5))

        let second = try await FaultServer.start(port: port)
        #expect(second.port == port)
        try await client.wait("the reopen") { $0.contains { $0.openReconnects == 1 } }
        try await second.wait("the queued messages") { $0.compactMap(\.received).count >= 6 }
        try await client.finish()
        try await second.wait("the deliberate close") { $0.contains { if case .close = $0 { return true } else { return false } } }

        let received = try await second.log.snapshot().compactMap(\.received)
        #expect(received.map(\.text) == ["login 1", "down 1", "down 2", "down 3", "down 4", "down 5"])
        #expect(Set(received.map(\.peer)) == [1])
        let events = try await client.log.snapshot()
        let closes = events.compactMap(\.closeReport)
        #expect(closes.first == ConnectionLifecycle.CloseReport(code: 1001, reason: "server shutting down", clean: true, by: .peer, willReconnect: true))
        #expect(events.compactMap(\.openReconnects) == [0, 1])
        #expect(events.compactMap(\.retry).map(\.attempt) == Array(1...events.compactMap(\.retry).count))
        #expect(events.compactMap(\.failure).allSatisfy { $0.step == .connect })
        #expect(try await client.onLoop { client.connection.stats.reconnects } == 1)
    }

    // MARK: 2. A stalled peer

    /// The peer stops reading and answering pings without closing. `chatty`: the client
    /// keeps sending meanwhile, which must not hide the silence from the heartbeat.
    @Test(arguments: [false, true])
    func stalledPeerIsDetectedWithinIntervalPlusTimeout(chatty: Bool) async throws {
        let interval = 0.3, timeout = 0.3
        let server = try await FaultServer.start { s in
            s.onMessage = { peer, text in
                if peer.id == 1, text == "first", !peer.isPaused {
                    s.fault(peer, "pause")
                    peer.pause(for: .seconds(30))
                }
            }
        }
        let heartbeat = HeartbeatMonitor.Configuration(interval: .milliseconds(300), timeout: .milliseconds(300))
        let sender = Sender()
        let client = try await FaultClient.start(server.url, configuration: FaultClient.configuration(reconnect: Self.fast(), heartbeat: heartbeat)) { c in
            c.onOpen = { connection, info in
                guard info.reconnects == 0 else { return }
                _ = connection.send(Self.text("first"), kind: .text)
                if chatty { sender.start(c, every: .milliseconds(50)) }
            }
        }
        try await client.wait("the loss", timeout: .seconds(3)) { $0.contains { $0.closeReport != nil } }
        try await client.wait("the reconnect") { $0.contains { $0.openReconnects == 1 } }
        try await client.onLoop { sender.stop() }

        let pausedAt = try #require(try await server.log.snapshot().first { if case .fault = $0 { return true } else { return false } }?.at)
        let events = try await client.log.snapshot()
        let loss = try #require(events.first { $0.closeReport != nil })
        let report = try #require(loss.closeReport)
        #expect(report == ConnectionLifecycle.CloseReport(code: 1006, reason: "heartbeat timeout", clean: false, by: .network, willReconnect: true))
        let detection = seconds(pausedAt, loss.at)
        print("stalled peer (chatty: \(chatty)): detected \(String(format: "%.3f", detection)) s after the pause (bound \(interval + timeout + 0.5) s)")
        #expect(detection < interval + timeout + 0.5)
        #expect(detection >= timeout - 0.02)
        #expect(events.map(\.kind) == ["open", "close", "retry", "open"])
        #expect(events.compactMap(\.retry).first?.attempt == 1)
        if chatty { #expect(sender.results.allSatisfy { $0.result == .sent || $0.result == .queued }) }
        try await client.finish()
        try await server.stop()
    }

    /// A heartbeat message goes out through the send budget like any message. With the
    /// budget full (the peer stopped reading) a probe larger than the room left is skipped
    /// rather than written past the budget; unanswered, it still ends the connection.
    @Test func heartbeatMessageStaysWithinTheSendBudget() async throws {
        let server = try await FaultServer.start { s in
            s.onMessage = { peer, text in
                if text == "first", !peer.isPaused { peer.pause(for: .seconds(30)) }
            }
        }
        let heartbeat = HeartbeatMonitor.Configuration(
            interval: .milliseconds(300), timeout: .milliseconds(300), probe: .message(reply: .anyMessage)
        )
        var configuration = FaultClient.configuration(reconnect: nil, heartbeat: heartbeat)
        configuration.queueBytes = 256 << 10
        let block = 16 << 10
        let client = try await FaultClient.start(server.url, configuration: configuration) { c in
            // Larger than the whole budget, so that it never fits, however far the peer
            // read before it paused (under load it can read for a while, leaving room for
            // a probe of a block's size, which then rightly went out).
            c.heartbeatMessage = ByteBuffer(repeating: 0x68, count: 300_000)
            c.onOpen = { connection, _ in
                _ = connection.send(Self.text("first"), kind: .text)
                // Until both sockets and then the budget are full: a few MiB.
                for _ in 0..<10_000 where connection.send(ByteBuffer(repeating: 0x61, count: block), kind: .text) != .queueFull {}
            }
        }
        try await client.wait("the heartbeat's verdict") { $0.contains { $0.closeReport != nil } }
        let report = try #require(try await client.log.snapshot().compactMap(\.closeReport).first)
        #expect(report.reason == "heartbeat timeout")
        let stats = try await client.onLoop { client.connection.stats }
        // Only "first" and whole blocks went out, not the probe.
        #expect(stats.sent > 1)
        #expect((stats.bytesSent - 5) % block == 0, "\(stats.bytesSent) bytes sent")
        try await server.stop()
    }

    // MARK: 3. 503 twice, then accepted

    @Test func twoRefusalsWith503ThenAnOpenAndTheAttemptCountIsReset() async throws {
        let server = try await FaultServer.start { s in
            s.server.rejectNext(2, status: 503)
            // Once open, a later loss: the first peer is dropped after its first message.
            s.onMessage = { peer, _ in
                if peer.id == 1 {
                    s.fault(peer, "abort")
                    peer.abort()
                }
            }
        }
        let policy = Self.fast(attempts: 5)
        let client = try await FaultClient.start(server.url, configuration: FaultClient.configuration(reconnect: policy)) { c in
            c.onOpen = { connection, info in _ = connection.send(Self.text("hi \(info.reconnects)"), kind: .text) }
        }
        try await client.wait("the open after the loss") { $0.contains { $0.openReconnects == 1 } }
        let events = try await client.log.snapshot()
        #expect(events.map(\.kind) == ["fail", "retry", "fail", "retry", "open", "close", "retry", "open"])
        let failures = events.compactMap(\.failure)
        #expect(failures.count == 2)
        #expect(failures.allSatisfy { $0.step == .handshake && $0.httpStatus == 503 }, "\(failures)")
        let retries = events.compactMap(\.retry)
        #expect(retries.map(\.attempt) == [1, 2, 1])
        for retry in retries {
            #expect(Self.withinJitter(retry.delay, base: policy.baseDelay(attempt: retry.attempt), jitter: 0.2), "attempt \(retry.attempt): \(retry.delay)")
        }
        #expect(events.compactMap(\.openReconnects) == [0, 1])
        #expect(events.compactMap(\.closeReport) == [ConnectionLifecycle.CloseReport(code: 1006, reason: "", clean: false, by: .network, willReconnect: true)])
        try await client.finish()
        try await server.stop()
    }

    // MARK: 4. 401 stops

    @Test func refusalWith401StopsWithoutRetrying() async throws {
        let server = try await FaultServer.start { s in s.server.rejectNext(1, status: 401) }
        let client = try await FaultClient.start(server.url, configuration: FaultClient.configuration(reconnect: Self.fast(attempts: 5)))
        try await client.wait("the final close") { $0.contains(where: \.isFinalClose) }
        // A retry would come 16-24 ms later and, the one refusal used up, be accepted.
        try await Task.sleep(nanoseconds: 300_000_000)
        let events = try await client.log.snapshot()
        #expect(events.map(\.kind) == ["fail", "close"])
        let failure = try #require(events.first?.failure)
        #expect(failure.step == .handshake && failure.httpStatus == 401)
        let report = try #require(events.last?.closeReport)
        #expect(report.willReconnect == false && report.code == 1006 && report.by == .peer && !report.clean)
        #expect(report.reason.contains("401"), "\(report.reason)")
        #expect(try await client.onLoop { (client.connection.state, client.connection.isAlive) } == ("closed", false))
        #expect(try await server.log.snapshot().isEmpty, "the server saw a second handshake")

        // The server would have accepted that second handshake: the silence above means something.
        let other = try await FaultClient.start(server.url, configuration: FaultClient.configuration(reconnect: nil))
        try await other.wait("a fresh client's open") { $0.contains { $0.openReconnects == 0 } }
        try await other.finish()
        try await server.stop()
    }

    // MARK: 5. A closed port: the backoff schedule

    @Test func closedPortRetriesOnScheduleWithinJitterAndStopsAtAttempts() async throws {
        let port = try closedPort()
        let policy = ReconnectPolicy(initial: .milliseconds(50), factor: 2, max: .milliseconds(400), jitter: 0.2, attempts: 5)
        let client = try await FaultClient.start("ws://127.0.0.1:\(port)/", configuration: FaultClient.configuration(reconnect: policy))
        try await client.wait("the final close", timeout: .seconds(6)) { $0.contains(where: \.isFinalClose) }
        try await Task.sleep(nanoseconds: 100_000_000)  // nothing may follow the final close
        let events = try await client.log.snapshot()
        let expectedKinds: [String] = ["fail", "retry", "fail", "retry", "fail", "retry", "fail", "retry", "fail", "retry", "fail", "close"]
        #expect(events.map(\.kind) == expectedKinds)
        #expect(events.compactMap(\.failure).allSatisfy { $0.step == .connect }, "\(events)")

        let expectedBases: [Double] = [0.05, 0.1, 0.2, 0.4, 0.4]
        let retries = events.enumerated().compactMap { index, event in event.retry.map { (index, $0.attempt, $0.delay, event.at) } }
        #expect(retries.map(\.1) == [1, 2, 3, 4, 5])
        let fails = events.filter { $0.failure != nil }.map(\.at)
        var lines: [String] = []
        for (n, (index, attempt, delay, askedAt)) in retries.enumerated() {
            let base = policy.baseDelay(attempt: attempt)
            #expect(abs(seconds(base) - expectedBases[n]) < 1e-9)
            #expect(Self.withinJitter(delay, base: base, jitter: 0.2), "attempt \(attempt): delay \(seconds(delay)) for base \(seconds(base))")
            // The dial after this retry failed at events[index + 1]; it cannot have come early.
            let waited = seconds(askedAt, events[index + 1].at)
            #expect(waited >= seconds(delay) - 0.002, "attempt \(attempt): dialled after \(waited) s, delay \(seconds(delay)) s")
            // Late is only the machine being busy; a generous bound still catches a lost timer.
            #expect(waited <= seconds(delay) + 5, "attempt \(attempt): dialled after \(waited) s, delay \(seconds(delay)) s")
            let betweenDials = seconds(fails[n], fails[n + 1])
            #expect(betweenDials >= seconds(base) * 0.8 - 0.002)
            lines.append(String(format: "attempt %d: base %.3f, delay %.4f, dial after %.4f, between dials %.4f", attempt, seconds(base), seconds(delay), waited, betweenDials))
        }
        print("closed port schedule:\n  " + lines.joined(separator: "\n  "))
        let report = try #require(events.last?.closeReport)
        #expect(report.willReconnect == false && report.code == 1006 && report.by == .network)
        #expect(try await client.onLoop { (client.connection.state, client.connection.isAlive) } == ("closed", false))
    }

    // MARK: 6. A steady sender across forced drops

    @Test func senderEvery10msAcross10DropsNeitherDuplicatesNorReordersNorLosesQueued() async throws {
        let drops = 10, perPeer = 15
        let server = try await FaultServer.start { s in
            var counts: [Int: Int] = [:]
            s.onMessage = { peer, _ in
                counts[peer.id, default: 0] += 1
                if counts[peer.id] == perPeer, peer.id <= drops {
                    s.fault(peer, "abort")
                    peer.abort()
                }
            }
        }
        let sender = Sender()
        let client = try await FaultClient.start(server.url, configuration: FaultClient.configuration(reconnect: Self.fast())) { c in
            c.onOpen = { _, info in if info.reconnects == 0 { sender.start(c, every: .milliseconds(10)) } }
        }
        try await server.wait("\(drops) drops and a steady last peer", timeout: .seconds(30)) { events in
            events.filter { $0.received?.peer == drops + 1 }.count >= perPeer
        }
        let last = try await client.onLoop { () -> Int in
            sender.stop()
            return sender.results.count
        }
        try await server.wait("the last message") { $0.contains { $0.received?.text == "\(last)" } }
        try await client.finish()

        let received = try await server.log.snapshot().compactMap(\.received).map { (peer: $0.peer, seq: Int($0.text)!) }
        let results = sender.results
        // None twice, none out of order.
        #expect(zip(received, received.dropFirst()).allSatisfy { $0.seq < $1.seq }, "\(received.map(\.seq))")
        #expect(Set(received.map(\.peer)) == Set(1...(drops + 1)))
        // No send refused.
        #expect(results.allSatisfy { $0.result == .sent || $0.result == .queued }, "\(results.filter { $0.result != .sent && $0.result != .queued })")
        // Everything queued while not open arrived, on the connection after the one it was queued behind.
        let peerOf = Dictionary(uniqueKeysWithValues: received.map { ($0.seq, $0.peer) })
        let queued = results.filter { $0.result == .queued }
        for message in queued {
            #expect(peerOf[message.seq] == message.reconnects + 2, "queued #\(message.seq) with \(message.reconnects) reconnects: peer \(peerOf[message.seq].map(String.init) ?? "none")")
        }
        #expect(Set(queued.map(\.reconnects)) == Set(0..<drops), "every drop left something queued")
        let lost = results.filter { $0.result == .sent && peerOf[$0.seq] == nil }
        print("10 drops: \(results.count) sends, \(queued.count) queued while down (all arrived), \(lost.count) lost in flight with the dropped connections, \(received.count) received")

        let events = try await client.log.snapshot()
        #expect(events.compactMap(\.openReconnects) == Array(0...drops))
        #expect(events.compactMap(\.closeReport).filter(\.willReconnect).count == drops)
        #expect(events.compactMap(\.closeReport).filter(\.willReconnect).allSatisfy { $0.code == 1006 && $0.by == .network })
        try await server.stop()
    }

    /// The peer breaks the protocol: the client fails the connection (close 1002) and
    /// waits for the peer's close frame, which a stalled peer never sends, until
    /// `close_timeout`. Meanwhile the connection is on its way down and will reconnect: a
    /// send then must be queued and arrive after the reconnect, not be refused and lost.
    @Test func sendsWhileFailingTheConnectionAreQueuedNotRefused() async throws {
        let server = try await FaultServer.start { s in
            s.onMessage = { peer, text in
                if peer.id == 1, text == "first", !peer.isPaused {
                    s.fault(peer, "unknown opcode, then stall")
                    peer.sendRaw(ByteBuffer(bytes: [0x83, 0x00]))
                    peer.pause(for: .seconds(30))
                }
            }
        }
        let sender = Sender()
        let configuration = FaultClient.configuration(reconnect: Self.fast(), closeTimeout: .milliseconds(300))
        let client = try await FaultClient.start(server.url, configuration: configuration) { c in
            c.onOpen = { connection, info in
                guard info.reconnects == 0 else { return }
                _ = connection.send(Self.text("first"), kind: .text)
                sender.start(c, every: .milliseconds(10))
            }
        }
        try await client.wait("the reopen") { $0.contains { $0.openReconnects == 1 } }
        try await server.wait("messages on the second connection") { $0.filter { $0.received?.peer == 2 }.count >= 5 }
        let last = try await client.onLoop { () -> Int in
            sender.stop()
            return sender.results.count
        }
        try await server.wait("the last message") { $0.contains { $0.received?.text == "\(last)" } }
        try await client.finish()

        let events = try await client.log.snapshot()
        #expect(events.map(\.kind) == ["open", "fail", "close", "retry", "open", "close"])
        #expect(events.compactMap(\.failure).first?.closeCode == 1002)
        #expect(events.compactMap(\.closeReport).first.map { $0.code == 1002 && $0.willReconnect } == true)
        let results = sender.results
        let refused = results.filter { $0.result == .closed }
        #expect(refused.isEmpty, "\(refused.count) of \(results.count) sends refused with .closed while the connection was going to reconnect (state \(Set(refused.map(\.state))), seqs \(refused.map(\.seq)))")
        let received = try await server.log.snapshot().compactMap(\.received).filter { $0.text != "first" }.map { (peer: $0.peer, seq: Int($0.text)!) }
        #expect(zip(received, received.dropFirst()).allSatisfy { $0.seq < $1.seq })
        let peerOf = Dictionary(uniqueKeysWithValues: received.map { ($0.seq, $0.peer) })
        // Everything not sent on the first connection reached the second.
        let notSent = results.filter { $0.result != .sent }
        #expect(notSent.count >= 10, "the 300 ms window holds some 30 sends")
        #expect(notSent.allSatisfy { peerOf[$0.seq] == 2 }, "lost: \(notSent.filter { peerOf[$0.seq] != 2 }.map(\.seq))")
        print("failing connection window: \(results.count) sends, \(results.filter { $0.result == .queued }.count) queued, \(refused.count) refused")
        try await server.stop()
    }

    /// What the transport refuses at the flush (here a message a TCP line framing cannot
    /// carry, queued before the connection opened) must not take the rest of the queue with it.
    @Test func aMessageTheTransportRefusesAtTheFlushDoesNotDropTheRestOfTheQueue() async throws {
        let server = try await FaultServer.start(scheme: "tcp")
        let client = try await FaultClient.start(server.url, configuration: FaultClient.configuration(reconnect: Self.fast())) { c in
            // Still connecting: all three are queued.
            let results = ["one", "bad\nline", "two"].map { c.connection.send(Self.text($0), kind: .text) }
            #expect(results == [.queued, .queued, .queued])
        }
        try await client.wait("the open") { $0.contains { $0.openReconnects == 0 } }
        let after = try await client.onLoop { client.connection.send(Self.text("three"), kind: .text) }
        #expect(after == .sent)
        try await server.wait("the message sent after the flush") { $0.contains { $0.received?.text == "three" } }
        let received = try await server.log.snapshot().compactMap(\.received).map(\.text)
        #expect(received == ["one", "two", "three"])
        let stats = try await client.onLoop { client.connection.stats }
        #expect(stats.queued == 0)
        #expect(stats.dropped == 1, "the unsendable message counts as dropped")
        try await client.finish()
        try await server.stop()
    }

    // MARK: 7. The on_reconnect hook

    @Test func reconnectHookAnsweringStopEndsTheConnection() async throws {
        let server = try await FaultServer.start { s in
            s.onMessage = { peer, _ in if peer.id == 1 { peer.abort() } }
        }
        let client = try await FaultClient.start(server.url, configuration: FaultClient.configuration(reconnect: Self.fast())) { c in
            c.onOpen = { connection, _ in _ = connection.send(Self.text("hi"), kind: .text) }
            c.onReconnect = { _, _ in ManagedConnection.RetryDecision(answer: .stop) }
        }
        try await client.wait("the final close") { $0.contains(where: \.isFinalClose) }
        try await Task.sleep(nanoseconds: 200_000_000)  // a dial would come after 16-24 ms
        let events = try await client.log.snapshot()
        #expect(events.map(\.kind) == ["open", "close", "retry", "close"])
        #expect(events.compactMap(\.closeReport).map(\.willReconnect) == [true, false])
        #expect(events.last?.closeReport?.code == 1006 && events.last?.closeReport?.by == .network)
        let (state, alive, afterwards) = try await client.onLoop {
            (client.connection.state, client.connection.isAlive, client.connection.send(Self.text("late"), kind: .text))
        }
        #expect(state == "closed" && !alive && afterwards == .closed)
        #expect(try await server.log.snapshot().compactMap(\.connectedPeer) == [1])
        try await server.stop()
    }

    @Test func reconnectHookAnsweringAnotherURLDialsIt() async throws {
        let first = try await FaultServer.start { s in
            s.onMessage = { peer, _ in if peer.id == 1 { peer.abort() } }
        }
        let second = try await FaultServer.start()
        let secondURL = try TransportURL(second.url)
        let client = try await FaultClient.start(first.url, configuration: FaultClient.configuration(reconnect: Self.fast())) { c in
            c.onOpen = { connection, info in _ = connection.send(Self.text("hi \(info.reconnects)"), kind: .text) }
            c.onReconnect = { _, _ in ManagedConnection.RetryDecision(url: secondURL, headers: [("X-Token", "fresh")]) }
        }
        try await client.wait("the open on the second server") { $0.contains { $0.openReconnects == 1 } }
        try await second.wait("its message") { $0.contains { $0.received?.text == "hi 1" } }
        try await client.finish()

        let connects = try await second.log.snapshot().compactMap { event -> ServerPeerRequest? in
            if case .connect(_, let request, _) = event { return request } else { return nil }
        }
        #expect(connects.count == 1)
        #expect(connects.first?.headers["X-Token"] == ["fresh"])
        #expect(try await first.log.snapshot().compactMap(\.connectedPeer) == [1])
        #expect(try await client.onLoop { client.connection.url } == secondURL)
        try await first.stop()
        try await second.stop()
    }
}

/// Sends a numbered message ("1", "2", ...) every period on a client's loop and keeps
/// each send's result with the connection's reconnect count and state at that moment.
final class Sender: @unchecked Sendable {
    struct Result {
        var seq: Int
        var result: ManagedConnection.SendResult
        var reconnects: Int
        var state: String
    }

    /// Touched on the client's loop; read by the test after `stop()`.
    private(set) var results: [Result] = []
    private var task: RepeatedTask?

    /// Call on the client's loop.
    func start(_ client: FaultClient, every period: TimeAmount) {
        guard self.task == nil else { return }
        self.task = client.loop.scheduleRepeatedTask(initialDelay: .zero, delay: period) { [unowned self] _ in
            let connection = client.connection!
            let seq = self.results.count + 1
            let state = connection.state
            let result = connection.send(ByteBuffer(string: "\(seq)"), kind: .text)
            self.results.append(Result(seq: seq, result: result, reconnects: connection.stats.reconnects ?? 0, state: state))
        }
    }

    /// Call on the client's loop.
    func stop() {
        self.task?.cancel()
        self.task = nil
    }
}
