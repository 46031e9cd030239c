import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import MoonwireCore

/// Busy polling after a flush (`run --busy-poll`), against Debian's node `ws` echo.
@Suite(.timeLimit(.minutes(2))) struct BusyPollTests {
    @Test func allowedCPUsCountTheMaskOfProcStatus() {
        #expect(BusyPoll.allowedCPUs(status: "Name:\tx\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n") == 2)
        #expect(BusyPoll.allowedCPUs(status: "Cpus_allowed:\t2\n") == 1)
        #expect(BusyPoll.allowedCPUs(status: "Cpus_allowed:\tff,ffffffff\n") == 40)
        #expect(BusyPoll.allowedCPUs(status: nil) == System.coreCount)
    }

    /// Each echo is asked for at least once after its send, every echo arrives in order,
    /// polling stops once the window is over, and closing the loop closes the pipe.
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

        let passes = try await loop.submit { poll.value?.passes ?? 0 }.get()
        #expect(passes >= count, "one pass at least after each of the \(count) sends")
        try await BusyPollTests.waitUntil(loop, "polling stops") { poll.value?.isPolling == false }

        try await group.shutdownGracefully()
        #expect(poll.value?.isOpen == false)
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
