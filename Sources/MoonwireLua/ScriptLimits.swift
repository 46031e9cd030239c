#if canImport(Glibc)
import Glibc
#endif
import MoonwireCore

/// What one Lua state may take from the process: memory, and how long a
/// callback may hold the event loop. Each field is nil where nothing chose it
/// (a command-line flag or `mw.limits`); `resolved` fills in the defaults.
///
/// ```swift
/// var limits = ScriptLimits(memory: 512 << 20)   // run --memory-limit 512M
/// limits.resolved(workers: 1).callbackTimeout      // 10
/// ```
public struct ScriptLimits: Equatable, Sendable {
    /// Bytes the Lua state may hold; 0 for no limit.
    public var memory: Int?
    /// Seconds a callback may run before it is reported (once); 0 for never.
    public var callbackWarning: Double?
    /// Seconds a callback may run before it is interrupted with an error; 0 for never.
    public var callbackTimeout: Double?
    /// Bytes all connections of the process may hold waiting to be sent (the process-wide
    /// send budget, shared by the workers); 0 for no limit.
    public var sendBudget: Int?

    public init(memory: Int? = nil, callbackWarning: Double? = nil, callbackTimeout: Double? = nil, sendBudget: Int? = nil) {
        self.memory = memory
        self.callbackWarning = callbackWarning
        self.callbackTimeout = callbackTimeout
        self.sendBudget = sendBudget
    }

    /// The smallest memory limit: below it the prelude itself does not fit.
    public static let minimumMemory = 8 << 20

    /// 10 s, as `moonwire test`'s timeout: by then a peer with the default
    /// heartbeat (timeout 10 s) has given up on every connection the loop holds.
    public static let defaultCallbackTimeout = 10.0
    public static let defaultCallbackWarning = 1.0

    /// 1 GiB per state, but never more than half the machine's memory shared
    /// by the states running side by side: a script that eats memory then
    /// fails with an error at its line, before the kernel's OOM killer ends
    /// the whole process (and the other workers with it).
    public static func defaultMemory(workers: Int) -> Int {
        let physical = ByteSize.physicalMemory
        guard physical > 0 else { return 1 << 30 }
        return max(minimumMemory, min(1 << 30, physical / 2 / max(1, workers)))
    }

    /// Each field this one leaves nil taken from `other`.
    public func over(_ other: ScriptLimits) -> ScriptLimits {
        ScriptLimits(
            memory: memory ?? other.memory, callbackWarning: callbackWarning ?? other.callbackWarning,
            callbackTimeout: callbackTimeout ?? other.callbackTimeout, sendBudget: sendBudget ?? other.sendBudget
        )
    }

    /// Every field set: this one's, else the default.
    public func resolved(workers: Int) -> ScriptLimits {
        over(ScriptLimits(
            memory: Self.defaultMemory(workers: workers), callbackWarning: Self.defaultCallbackWarning,
            callbackTimeout: Self.defaultCallbackTimeout, sendBudget: SendBudgetPool.defaultBudget
        ))
    }

    /// `512 MiB`, `1.5 GiB`, `300 KiB`: how a limit reads in a message.
    public static func describe(bytes: Int) -> String {
        ByteSize.describe(bytes)
    }
}
