#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// How a connection retries after a loss: the script's `reconnect` option.
///
/// The delay before attempt *n* (1-based, counted since the last successful open) is
/// `min(max, initial * factor^(n-1))`, spread by ±`jitter` (a fraction of it). At most
/// `attempts` tries follow each loss; `nil` means for ever (`math.huge` in Lua).
///
/// A close the script did not ask for is a loss like any other: a server that restarts
/// says 1000 or 1001, and the connection comes back. A close from the peer whose code
/// means "do not come back" (``doNotComeBack``, ``stopCodes``, and 1000 when
/// ``onNormalClose`` is false) ends it instead.
///
/// ```swift
/// var policy = ReconnectPolicy()                   // 1 s, 2 s, 4 s … 30 s, ±20 %, 10 tries
/// policy.baseDelay(attempt: 3)                     // 4 s
/// policy.delay(attempt: 3, random: 0.5)            // 4 s: the middle of the jitter band
/// policy.delay(attempt: 3, random: 0)              // 3.2 s: its lower edge
/// policy.attempts = nil                            // retry for ever
/// ```
public struct ReconnectPolicy: Sendable, Hashable {
    /// The delay before the first attempt.
    public var initial: TimeAmount
    /// How much each delay grows over the one before.
    public var factor: Double
    /// The largest delay before jitter.
    public var max: TimeAmount
    /// The fraction by which a delay is spread either way, in 0...1.
    public var jitter: Double
    /// The most attempts after each loss; `nil` for no limit.
    public var attempts: Int?
    /// Whether a close code 1000 from the peer is retried (`on_normal_close`, default
    /// true: most servers say 1000 when they shut down for a restart).
    public var onNormalClose: Bool
    /// More close codes from the peer that end the connection for good (`stop_codes`),
    /// on top of ``doNotComeBack``.
    public var stopCodes: Set<UInt16>
    /// Whether handshakes refused with an HTTP 4xx status are retried (`retry_http`).
    public var retryHTTP: Bool

    /// Creates a policy; the defaults are those of the `reconnect` option.
    public init(
        initial: TimeAmount = .seconds(1),
        factor: Double = 2,
        max: TimeAmount = .seconds(30),
        jitter: Double = 0.2,
        attempts: Int? = 10,
        onNormalClose: Bool = true,
        stopCodes: Set<UInt16> = [],
        retryHTTP: Bool = false
    ) {
        self.initial = initial
        self.factor = factor
        self.max = max
        self.jitter = jitter
        self.attempts = attempts
        self.onNormalClose = onNormalClose
        self.stopCodes = stopCodes
        self.retryHTTP = retryHTTP
    }

    /// Close codes that mean "do not come back" whatever the script says: 1003 (the peer
    /// cannot take what we send) and 1008 (policy violation: banned, unauthorised).
    /// Reconnecting would only be refused again, or make matters worse.
    public static let doNotComeBack: Set<UInt16> = [CloseCode.unsupportedData, CloseCode.policyViolation]

    /// Whether a close with `code`, from the peer, ends the connection for good.
    ///
    /// ```swift
    /// ReconnectPolicy().stops(afterPeerClose: 1001)                        // false: a restart
    /// ReconnectPolicy().stops(afterPeerClose: 1008)                        // true
    /// ReconnectPolicy(stopCodes: [4001]).stops(afterPeerClose: 4001)       // true
    /// ReconnectPolicy(onNormalClose: false).stops(afterPeerClose: 1000)    // true
    /// ```
    public func stops(afterPeerClose code: UInt16) -> Bool {
        if code == CloseCode.normal { return !self.onNormalClose }
        return Self.doNotComeBack.contains(code) || self.stopCodes.contains(code)
    }

    /// Whether attempt `n` (1-based) is still within ``attempts``.
    public func allows(attempt n: Int) -> Bool {
        guard let attempts = self.attempts else { return true }
        return n <= attempts
    }

    /// The delay before attempt `n` (1-based) without jitter: `min(max, initial * factor^(n-1))`.
    public func baseDelay(attempt n: Int) -> TimeAmount {
        precondition(n >= 1, "attempts are counted from 1")
        let grown = Double(self.initial.nanoseconds) * pow(self.factor, Double(n - 1))
        // A NaN (0 × ∞) or a huge power must not escape as garbage: the cap bounds both.
        let capped = grown.isNaN ? Double(self.max.nanoseconds) : Swift.min(Double(self.max.nanoseconds), grown)
        return Self.nanoseconds(capped)
    }

    /// The delay before attempt `n` (1-based), spread by ±``jitter``.
    ///
    /// - Parameter random: a number in `0..<1`; 0 gives the lower edge of the band,
    ///   0.5 the undisturbed delay, and values near 1 the upper edge.
    public func delay(attempt n: Int, random: Double) -> TimeAmount {
        let base = Double(self.baseDelay(attempt: n).nanoseconds)
        let spread = 1 + self.jitter * (2 * random - 1)
        return Self.nanoseconds(base * spread)
    }

    private static func nanoseconds(_ value: Double) -> TimeAmount {
        guard value > 0 else { return .zero }
        guard value < Double(Int64.max) else { return .nanoseconds(.max) }
        return .nanoseconds(Int64(value.rounded()))
    }
}
