import ArgumentParser
import MoonwireLua

/// `--memory-limit`, for every command that runs Lua (run, listen --script, test).
struct MemoryLimitOption: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Bytes the script's Lua state may hold, such as 512M or 2G; 0 for no limit. Past it an allocation is a Lua error at the script's line. Default: 1G, at most half the machine's memory shared by the workers.",
        valueName: "bytes"))
    var memoryLimit: String?

    func validate() throws { _ = try bytes() }

    func bytes() throws -> Int? {
        let bytes = try ArgumentValues.limit(memoryLimit, flag: "--memory-limit")
        if let bytes, bytes != 0, bytes < ScriptLimits.minimumMemory {
            throw ValidationError("--memory-limit \(memoryLimit ?? "") is too small for the Lua state itself; give 8M or more, or 0 for no limit")
        }
        return bytes
    }
}

/// `--send-budget`, for run, listen (with or without --script) and test.
struct SendBudgetOption: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Bytes all connections of the process may hold waiting to be sent, on top of each connection's own queue.bytes, such as 256M or 2G; 0 for no process limit. Past it sends are refused (\"queue full (process send budget ...)\") or dropped by each connection's overflow rule. Default: a quarter of the machine's memory, at most 1G, shared by the workers.",
        valueName: "bytes"))
    var sendBudget: String?

    func validate() throws { _ = try bytes() }

    func bytes() throws -> Int? { try ArgumentValues.limit(sendBudget, flag: "--send-budget") }
}

/// `run` and `listen`: the memory limit, how long a callback may hold the event loop, and
/// the process-wide send budget.
struct LimitOptions: ParsableArguments {
    @OptionGroup var memory: MemoryLimitOption
    @OptionGroup var sendBudget: SendBudgetOption

    @Option(help: ArgumentHelp(
        "Seconds a callback may run without returning to the event loop before it is interrupted with a Lua error at its line; 0 never interrupts. Default: 10.",
        valueName: "seconds"))
    var callbackTimeout: Double?

    @Option(help: ArgumentHelp(
        "Seconds a callback may run before it is reported on stderr (once, with its file:line); 0 never reports. Default: 1.",
        valueName: "seconds"))
    var callbackWarning: Double?

    func validate() throws { _ = try limits() }

    /// What the command line chose; the rest is left to the script's mw.limits and the defaults.
    func limits() throws -> ScriptLimits {
        ScriptLimits(
            memory: try memory.bytes(),
            callbackWarning: try callbackWarning.map { try ArgumentValues.seconds($0, flag: "--callback-warning") },
            callbackTimeout: try callbackTimeout.map { try ArgumentValues.seconds($0, flag: "--callback-timeout") },
            sendBudget: try sendBudget.bytes()
        )
    }
}
