import NIOCore

/// Counts the reconnection attempts since the last successful open and gives each one
/// its delay under a ``ReconnectPolicy``.
///
/// The random source is injected so tests can pin the jitter; it must return numbers in
/// `0..<1`.
///
/// ```swift
/// var backoff = ReconnectBackoff(policy: ReconnectPolicy(attempts: 2))
/// backoff.next()      // (attempt: 1, delay: ~1 s)
/// backoff.next()      // (attempt: 2, delay: ~2 s)
/// backoff.next()      // nil: attempts used up
/// backoff.reset()     // the connection opened again
/// backoff.next()      // (attempt: 1, delay: ~1 s)
/// ```
public struct ReconnectBackoff {
    /// The policy the next delays follow; changing it keeps the attempt count.
    public var policy: ReconnectPolicy
    /// Attempts handed out by ``next()`` since the last ``reset()``.
    public private(set) var attempt = 0
    private let random: () -> Double

    /// Creates a backoff with no attempts made.
    ///
    /// - Parameters:
    ///   - policy: the delays and the attempt limit.
    ///   - random: the jitter's source, returning numbers in `0..<1`.
    public init(policy: ReconnectPolicy, random: @escaping () -> Double = { Double.random(in: 0..<1) }) {
        self.policy = policy
        self.random = random
    }

    /// True when the policy allows no further attempt.
    public var isExhausted: Bool { !self.policy.allows(attempt: self.attempt + 1) }

    /// Counts one more attempt and returns its number and delay, or nil (counting
    /// nothing) when the attempts are used up.
    public mutating func next() -> (attempt: Int, delay: TimeAmount)? {
        guard !self.isExhausted else { return nil }
        self.attempt += 1
        return (self.attempt, self.policy.delay(attempt: self.attempt, random: self.random()))
    }

    /// Starts counting from zero again, as after a successful open.
    public mutating func reset() {
        self.attempt = 0
    }
}
