import NIOCore
import Testing

@testable import MoonwireCore

extension LifecycleTests {
    @Suite struct ReconnectBackoffTests {
        /// Random numbers from a fixed list, repeated.
        final class Script {
            var values: [Double]
            var index = 0
            init(_ values: [Double]) { self.values = values }
            func next() -> Double {
                defer { index += 1 }
                return values[index % values.count]
            }
        }

        @Test func scheduleStaysWithinJitterAndStopsAtAttempts() {
            var rng = SystemRandomNumberGenerator()
            for _ in 0..<200 {
                var backoff = ReconnectBackoff(policy: ReconnectPolicy()) { Double.random(in: 0..<1, using: &rng) }
                var attempts: [Int] = []
                while case let (attempt, delay)? = backoff.next() {
                    attempts.append(attempt)
                    let base = Double(ReconnectPolicy().baseDelay(attempt: attempt).nanoseconds)
                    let seconds = Double(delay.nanoseconds)
                    #expect(seconds >= base * 0.8 && seconds <= base * 1.2, "attempt \(attempt): \(delay)")
                }
                #expect(attempts == Array(1...10))
                #expect(backoff.isExhausted)
            }
        }

        @Test func pinnedRandomGivesExactDelays() {
            let script = Script([0, 0.5, 0.75])
            var backoff = ReconnectBackoff(policy: ReconnectPolicy(attempts: 4), random: script.next)
            #expect(backoff.next()! == (1, .milliseconds(800)))
            #expect(backoff.next()! == (2, .seconds(2)))
            #expect(backoff.next()! == (3, .milliseconds(4_400)))
            #expect(backoff.next()! == (4, .milliseconds(6_400)))
            #expect(backoff.next() == nil)
            #expect(backoff.attempt == 4)
        }

        @Test func resetStartsOver() {
            var backoff = ReconnectBackoff(policy: ReconnectPolicy(jitter: 0, attempts: 2))
            _ = backoff.next()
            _ = backoff.next()
            #expect(backoff.next() == nil)
            backoff.reset()
            #expect(backoff.attempt == 0)
            #expect(!backoff.isExhausted)
            #expect(backoff.next()! == (1, .seconds(1)))
        }

        @Test func foreverNeverRunsOut() {
            var backoff = ReconnectBackoff(policy: ReconnectPolicy(jitter: 0, attempts: nil))
            for _ in 0..<10_000 { #expect(backoff.next() != nil) }
            #expect(backoff.next()! == (10_001, .seconds(30)))
        }

        @Test func zeroAttemptsMeansNoRetry() {
            var backoff = ReconnectBackoff(policy: ReconnectPolicy(attempts: 0))
            #expect(backoff.isExhausted)
            #expect(backoff.next() == nil)
            #expect(backoff.attempt == 0)
        }

        @Test func changingThePolicyKeepsTheCount() {
            var backoff = ReconnectBackoff(policy: ReconnectPolicy(jitter: 0))
            _ = backoff.next()
            _ = backoff.next()
            backoff.policy = ReconnectPolicy(initial: .seconds(10), jitter: 0, attempts: 3)
            #expect(backoff.next()! == (3, .seconds(30)))
            #expect(backoff.next() == nil)
        }
    }
}
