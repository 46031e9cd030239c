import ArgumentParser
import CLuaShim
import Foundation
import MoonwireCore
import MoonwireLua

#if canImport(Glibc)
import Glibc
#endif

@main
struct Moonwire: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "moonwire",
        abstract: "Run Lua 5.4 scripts over long-lived WebSocket and TCP connections.",
        version: ScriptRuntime.version,

        subcommands: [Run.self, Test.self, Connect.self, Listen.self, Replay.self, Metrics.self, Report.self, Check.self, LuaCommand.self, Init.self, Defs.self]
    )

    /// Parses and runs; usage errors print one line naming the problem and the fix,
    /// and exit 2 (argument-parser's own default would be 64).
    static func main() {
        MemoryTuning.apply()
        // Every connection holds a descriptor: as many as the hard limit allows.
        DescriptorLimit.raiseToHard()
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch let exit as ExitCode {
            Self.exit(withError: exit)
        } catch {
            if exitCode(for: error) == .success {
                Self.exit(withError: error)
            }
            let message = self.message(for: error)
                .split(whereSeparator: \.isNewline)
                .map { $0.trimmingCharacters(in: .whitespaces) }
                .joined(separator: " ")
            ScriptRuntime.writeToStderr("moonwire: \(message) (see 'moonwire --help')")
            Glibc.exit(2)
        }
    }
}

/// glibc's allocator defaults cost a page fault per large message: a frame buffer
/// just above 128 KiB is mmap'ed and unmapped for every message, and freed memory
/// at the top of a heap is given back and faulted in again. Buffers up to 1 MiB
/// come from the heap instead, and up to 16 MiB of free memory stays for reuse
/// (64 KiB messages: 560 -> 870 MiB/s through the CLI).
enum MemoryTuning {
    static func apply() {
        mw_tune_allocator(1 << 20, 16 << 20)
    }
}
