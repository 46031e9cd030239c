import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import MoonwireCore

/// Busy polling after a flush (`run --busy-poll`), against Debian's node `ws` echo.
@Suite(.timeLimit(.minutes(5))) struct BusyPollTests {
    /// A loop that polls still gets every echo, in order; polling stops once the window is
    /// over, and closing the loop closes the pipe.
    @Test func pollsAfterEachSendAndStopsAfterTheWindow() async throws {
        let peer = try PeerProcess(.nodeWS)
        defer { peer.stop() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let count = 200
        let poll = try await loop.submit { () -> BusyPollBox in
            BusyPoll.install(on: loop, window: .milliseconds(2))
            return BusyPollBox(BusyPoll.shared(on: loop))
        }.get()
        #expect(poll.value != nil)
        try await BusyPollTests.waitUntil(loop, "the pipe opens") { poll.value?.isOpen == true }

        let done = loop.makePromise(of: [ClientEvent].self)
        try await loop.submit {
            let sent = BusyPollBox(nil)
            let script = ClientScript(
                onOpen: { c, _ in try? c.send(.text("m0"), kind: .text) },
                onMessage: { c, _, _ in
                    sent.count += 1
                    if sent.count < count { try? c.send(.text("m\(sent.count)"), kind: .text) } else { try? c.close(code: 1000, reason: "") }
                })
            let delegate = RecordingDelegate(script: script, done: done)
            let connection = ClientConnection(url: try WebSocketURL("ws://127.0.0.1:\(peer.port)/"), options: WebSocketClientOptions(), eventLoop: loop)
            connection.delegate = delegate
            done.futureResult.whenComplete { _ in withExtendedLifetime((delegate, connection)) {} }
            try connection.connect()
        }.get()
        let events = try await done.futureResult.get()
        #expect(events.compactMap(\.text) == (0..<count).map { "m\($0)" })

        // How many sends were polled for depends on how soon the echoes came (the policy,
        // tested below): at least the first.
        let passes = try await loop.submit { poll.value?.passes ?? 0 }.get()
        #expect(passes >= 1)
        try await BusyPollTests.waitUntil(loop, "polling stops") { poll.value?.isPolling == false }

        try await group.shutdownGracefully()
        #expect(poll.value?.isOpen == false)
    }

    // MARK: The policy, step by step (times made up: nothing here waits)

    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static func at(_ us: Int64) -> NIODeadline { t0 + .microseconds(us) }

    /// An answer from another CPU: passes find nothing, yields are short, then the answer
    /// comes and the script sends again: polling goes on, and stops for good at a read
    /// with no send after it.
    @Test func anAnswerAfterIdlePassesKeepsPolling() {
        var p = PollPolicy(window: .microseconds(50))
        do { let asks = p.flushed(at: Self.at(0)); #expect(asks) }
        p.asked()
        for round in 0..<3 {
            for pass in 1...2 {
                let step = p.passed(at: Self.at(Int64(pass)))
                #expect(step == .yieldThenAsk, "round \(round) pass \(pass)")
                p.yielded(for: .nanoseconds(400))
                p.asked()
            }
            // The answer; the script sends again in the same pass.
            p.received()
            do { let asks = p.flushed(at: Self.at(0)); #expect(!asks, "still polling") }
            do { let step = p.passed(at: Self.at(3)); #expect(step == .ask, "a loop that just read does not yield") }
            p.asked()
        }
        // The last answer, after a pass that found nothing: no send after it.
        do { let step = p.passed(at: Self.at(10)); #expect(step == .yieldThenAsk) }
        p.asked()
        p.received()
        do { let step = p.passed(at: Self.at(30)); #expect(step == .stop) }
        #expect(!p.polling && p.skip == 0)
        do { let asks = p.flushed(at: Self.at(100)); #expect(asks) }
    }

    /// The answer is there at the first look (this loop's own peer, or one that ran on
    /// this CPU at once): polling backs off 1, 3, 7 ... 255 flushes, and one that pays
    /// again resets it.
    @Test func anAnswerAtTheFirstLookBacksOff() {
        var p = PollPolicy(window: .microseconds(50))
        var polled: [Int] = []
        for flush in 0..<400 {
            guard p.flushed(at: Self.at(0)) else { continue }
            polled.append(flush)
            p.asked()
            p.received()
            do { let step = p.passed(at: Self.at(1)); #expect(step == .stop) }
        }
        #expect(polled == [0, 2, 6, 14, 30, 62, 126, 254])
        #expect(p.skip > 0)
        // Let the back-off run out, then a poll that pays.
        while !p.flushed(at: Self.at(0)) {}
        p.asked()
        do { let step = p.passed(at: Self.at(2)); #expect(step == .yieldThenAsk) }
        p.yielded(for: .nanoseconds(300))
        p.asked()
        p.received()
        do { let step = p.passed(at: Self.at(3)); #expect(step == .stop) }
        #expect(p.skip == 0)
    }

    /// A yield that ran another thread, or no answer within the window: both back off.
    @Test func aLongYieldOrNoAnswerBacksOff() {
        var p = PollPolicy(window: .microseconds(50))
        do { let asks = p.flushed(at: Self.at(0)); #expect(asks) }
        p.asked()
        do { let step = p.passed(at: Self.at(1)); #expect(step == .yieldThenAsk) }
        p.yielded(for: .microseconds(12))
        p.asked()
        p.received()
        do { let step = p.passed(at: Self.at(14)); #expect(step == .stop) }
        #expect(p.skip == 1)

        var q = PollPolicy(window: .microseconds(50))
        do { let asks = q.flushed(at: Self.at(0)); #expect(asks) }
        q.asked()
        do { let step = q.passed(at: Self.at(20)); #expect(step == .yieldThenAsk) }
        q.asked()
        do { let step = q.passed(at: Self.at(51)); #expect(step == .stop) }
        #expect(q.skip == 1 && !q.polling)
    }

    @Test func aZeroWindowInstallsNothing() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let found = try await loop.submit { () -> Bool in
            BusyPoll.install(on: loop, window: .zero)
            return BusyPoll.shared(on: loop) != nil
        }.get()
        #expect(!found)
        try await group.shutdownGracefully()
    }

    /// Polls `condition` on `loop` every 10 ms; fails after 20 s (only an event that never
    /// comes takes that long).
    static func waitUntil(_ loop: EventLoop, _ what: String, _ condition: @escaping @Sendable () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(20)
        while try await !loop.submit(condition).get() {
            if Date() > deadline { throw PeerError(message: "timed out waiting until \(what)") }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
    }
}

/// A poller handed out of its loop for a test to look at from the loop again (or after the
/// loop has ended).
final class BusyPollBox: @unchecked Sendable {
    let value: BusyPoll?
    /// Echoes seen so far (touched on the loop only).
    var count = 0
    init(_ value: BusyPoll?) { self.value = value }
}
