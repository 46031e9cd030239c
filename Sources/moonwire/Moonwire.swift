import ArgumentParser
import Foundation
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
        subcommands: [Run.self, Test.self, Connect.self, Check.self]
    )

    /// Parses and runs; usage errors print one line naming the problem and the fix,
    /// and exit 2 (argument-parser's own default would be 64).
    static func main() {
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
