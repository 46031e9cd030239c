import NIOCore
import Testing

@testable import MoonwireCore

extension LifecycleTests {
    @Suite struct ReconnectPolicyTests {
        @Test func defaultsAreSpecs() {
            let policy = ReconnectPolicy()
            #expect(policy.initial == .seconds(1))
            #expect(policy.factor == 2)
            #expect(policy.max == .seconds(30))
            #expect(policy.jitter == 0.2)
            #expect(policy.attempts == 10)
            // A server that restarts says 1000 or 1001: the connection comes back.
            #expect(policy.onNormalClose)
            #expect(policy.stopCodes.isEmpty)
            #expect(!policy.retryHTTP)
        }

        @Test func codesThatMeanDoNotComeBack() {
            let policy = ReconnectPolicy(stopCodes: [4001])
            #expect([1000, 1001, 1006, 1011, 1012, 4000].allSatisfy { !policy.stops(afterPeerClose: $0) })
            #expect([1003, 1008, 4001].allSatisfy { policy.stops(afterPeerClose: $0) })
            #expect(ReconnectPolicy(onNormalClose: false).stops(afterPeerClose: 1000))
        }

        @Test(arguments: [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16), (6, 30), (7, 30), (100, 30), (5_000, 30)])
        func baseDelaysDoubleUpToTheCap(attempt: Int, seconds: Int64) {
            #expect(ReconnectPolicy().baseDelay(attempt: attempt) == .seconds(seconds))
        }

        @Test func fractionalSettings() {
            let policy = ReconnectPolicy(initial: .milliseconds(250), factor: 1.5, max: .seconds(1))
            let delays = (1...6).map { policy.baseDelay(attempt: $0) }
            #expect(delays == [.microseconds(250_000), .microseconds(375_000), .microseconds(562_500), .microseconds(843_750), .seconds(1), .seconds(1)])
        }

        @Test(arguments: [(0.0, 3_200), (0.25, 3_600), (0.5, 4_000), (0.75, 4_400)])
        func jitterSpreadsAroundTheBase(random: Double, milliseconds: Int64) {
            #expect(ReconnectPolicy().delay(attempt: 3, random: random) == .milliseconds(milliseconds))
        }

        @Test func jitterMaySpreadPastTheCapAsSpecSays() {
            #expect(ReconnectPolicy().delay(attempt: 9, random: 0.75) == .seconds(33))
        }

        @Test func noJitterIsExact() {
            let policy = ReconnectPolicy(jitter: 0)
            #expect(policy.delay(attempt: 2, random: 0) == .seconds(2))
            #expect(policy.delay(attempt: 2, random: 0.999) == .seconds(2))
        }

        @Test func attemptLimit() {
            let policy = ReconnectPolicy(attempts: 3)
            #expect((1...5).map(policy.allows(attempt:)) == [true, true, true, false, false])
            #expect(ReconnectPolicy(attempts: nil).allows(attempt: 1_000_000))
            #expect(!ReconnectPolicy(attempts: 0).allows(attempt: 1))
        }

        @Test func extremeSettingsStayFinite() {
            let policy = ReconnectPolicy(initial: .seconds(1), factor: 1e300, max: .nanoseconds(.max))
            #expect(policy.baseDelay(attempt: 3) == .nanoseconds(.max))
            #expect(ReconnectPolicy(initial: .zero, factor: .infinity).baseDelay(attempt: 2) == .seconds(30))
            #expect(ReconnectPolicy(jitter: 1.5).delay(attempt: 1, random: 0) == .zero)
        }
    }
}
