import CLua
import CLuaShim

/// The runtime surviving its script: a memory limit for the Lua state, and a
/// callback that holds the loop too long reported, then interrupted. The
/// counting and the checks are C (the guard in CLuaShim.c); this side sets
/// the limits and puts the guard's findings into words.
extension ScriptRuntime {
    /// The limits in force: the command line's, else the script's `mw.limits`, else the
    /// command's defaults, else the usual ones.
    var limits: ScriptLimits { options.limits.over(scriptLimits).over(options.defaultLimits).resolved(workers: options.workers) }

    func installGuard() {
        mw_guard_on_slow(vm.guardState, reportSlowCallback, context)
        applyLimits()
    }

    func applyLimits() {
        let limits = self.limits
        mw_guard_set_memory_limit(vm.guardState, limits.memory ?? 0)
        mw_guard_set_callback_limits(vm.guardState, limits.callbackWarning ?? 0, limits.callbackTimeout ?? 0)
        // Each worker's loop holds its part of the process's budget.
        processSendBudget = limits.sendBudget ?? 0
        sendBudget.budget = processSendBudget == 0 ? 0 : max(1, processSendBudget / max(1, options.workers))
    }

    /// The words of a send the budget turned away: the connection's own budget, or the
    /// process's (`queue full (process send budget 256 MiB)`, which still starts as the
    /// connection's does, for scripts that match it).
    func refusal(_ words: String, byProcessBudget: Bool) -> String {
        byProcessBudget ? "\(words) (process send budget \(ScriptLimits.describe(bytes: processSendBudget)))" : words
    }

    /// The one warning, the first time the process-wide budget turned a message away.
    func warnSendBudgetReached() {
        let budget = ScriptLimits.describe(bytes: processSendBudget)
        let share = options.workers > 1 ? " (this worker's part: \(ScriptLimits.describe(bytes: sendBudget.budget)))" : ""
        options.logger.warning(
            "the process send budget \(budget)\(share) is reached (\(sendBudget.used) bytes waiting on all connections): sends are refused or dropped by each connection's overflow rule until it falls under half; raise it with --send-budget or mw.limits { send_budget = ... }"
        )
    }

    /// A callback has held the loop for `seconds` (once per callback).
    fileprivate func reportSlow(at location: String, seconds: Double) {
        let timeout = limits.callbackTimeout ?? 0
        let what = timeout > 0
            ? "interrupted at \(timeout.formatted) s; see --callback-timeout or mw.limits"
            : "never interrupted: callback timeout 0"
        options.logger.warning(
            "\(location): a callback has run for \(seconds.formatted) s without returning to the event loop; every connection, timer and heartbeat of the script waits for it (\(what))"
        )
    }

    /// Lua's own "not enough memory", with no place, when the guard refused an
    /// allocation: `file:line: out of memory (Lua memory limit 512 MiB reached)`,
    /// at the user's line. The place is the traceback's first line of the
    /// user's code when there is a traceback (a coroutine's), else where the
    /// main thread was when the allocation was refused; none when neither is
    /// the user's (the test runner then names the test).
    func explainingMemoryLimit(_ message: String) -> String {
        let lua = "not enough memory"
        guard message.hasPrefix(lua) else { return message }
        var buffer = [CChar](repeating: 0, count: 256)
        guard mw_guard_refusal(vm.guardState, &buffer, buffer.count) != 0 else { return message }
        let limit = ScriptLimits.describe(bytes: mw_guard_memory_limit(vm.guardState))
        let refusedAt = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let location = Self.firstUserFrame(inTraceback: message) ?? (refusedAt == "?" || refusedAt.hasPrefix("moonwire/") ? nil : refusedAt)
        let text = "out of memory (Lua memory limit \(limit) reached; --memory-limit, mw.limits)" + message.dropFirst(lua.count)
        return location.map { "\($0): \(text)" } ?? text
    }

    /// `file:line` of the first traceback line that is the user's code.
    static func firstUserFrame(inTraceback text: String) -> String? {
        for line in text.split(separator: "\n").drop(while: { !$0.hasPrefix("stack traceback:") }).dropFirst() {
            let frame = line.drop { $0 == "\t" || $0 == " " }
            guard !frame.hasPrefix("[C]"), !frame.hasPrefix("moonwire/"), !frame.hasPrefix("(") else { continue }
            let parts = frame.split(separator: ":", maxSplits: 2)
            guard parts.count >= 2, Int(parts[1]) != nil else { continue }
            return "\(parts[0]):\(parts[1])"
        }
        return nil
    }

    /// `mw.limits { memory = BYTES, callback_warning = S, callback_timeout = S, send_budget = BYTES }`:
    /// changes what the command line left to the script, from now on; returns
    /// the limits in force (with no argument, only that).
    func setLimits(_ args: LuaArguments) throws -> Int32 {
        if !args.isNoneOrNil(1) {
            var t = try LuaOptionTable(try args.value(1), function: args.function, argument: 1, path: "limits")
            var chosen = scriptLimits
            if let memory = try t.integer("memory") {
                guard memory == 0 || memory >= ScriptLimits.minimumMemory else {
                    throw t.error("memory", "at least \(ScriptLimits.minimumMemory) bytes (8 MiB), or 0 for no limit")
                }
                chosen.memory = memory
            }
            chosen.sendBudget = try t.integer("send_budget") ?? chosen.sendBudget
            chosen.callbackWarning = try t.seconds("callback_warning") ?? chosen.callbackWarning
            chosen.callbackTimeout = try t.seconds("callback_timeout") ?? chosen.callbackTimeout
            try t.finish()
            scriptLimits = chosen
            applyLimits()
        }
        let limits = self.limits
        args.lua.push(LuaValue.table([
            .text("memory"): .integer(Int64(limits.memory ?? 0)),
            .text("callback_warning"): .number(limits.callbackWarning ?? 0),
            .text("callback_timeout"): .number(limits.callbackTimeout ?? 0),
            .text("send_budget"): .integer(Int64(limits.sendBudget ?? 0)),
        ]))
        return 1
    }
}

/// Called by the guard's count hook, on the loop, while the callback still runs.
/// Plain Swift that returns: nothing here can raise a Lua error.
private let reportSlowCallback: mw_slow_fn = { context, location, seconds in
    guard let context, let location else { return }
    Unmanaged<ScriptRuntime>.fromOpaque(context).takeUnretainedValue()
        .reportSlow(at: String(cString: location), seconds: seconds)
}

extension Double {
    /// `1`, `2.5`, `10.3`: seconds in a message.
    fileprivate var formatted: String {
        let tenths = (self * 10).rounded() / 10
        return tenths == tenths.rounded() ? String(Int(tenths)) : String(tenths)
    }
}
