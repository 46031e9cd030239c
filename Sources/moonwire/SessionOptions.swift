import ArgumentParser
import Foundation
import MoonwireLua

/// How `connect` and `listen` show messages and read input: the flags both take.
struct SessionOptions: ParsableArguments {
    /// Not CaseIterable: the help line names the forms itself, in one line
    /// (`connect --help` fits in 45).
    enum BinaryForm: String, ExpressibleByArgument {
        case hex, base64, text
    }

    @Flag(name: .customLong("binary"), help: "Input lines are hex, sent as binary.")
    var hexInput = false

    @Option(help: ArgumentHelp("Show binary as hex, base64 or text.", valueName: "form"))
    var binaryAs: BinaryForm = .hex

    @Flag(help: "Pretty-print messages that are JSON.")
    var json = false

    @Flag(help: "Put the time in front of every line.")
    var timestamps = false

    @Flag(help: "No colours (as NO_COLOR=1).")
    var noColor = false

    @Flag(help: "Every event as a line of JSON.")
    var jsonl = false

    @OptionGroup var codec: ConsoleCodecOptions

    /// The codec flags, and not with --binary.
    func validateCodec() throws {
        try codec.validate()
        if let flag = codec.flag, hexInput { throw ValidationError("--binary and \(flag) both say how lines are sent; give one") }
    }

    /// Line editor and prompt: stdin and stdout are terminals, and no machine output was asked for.
    var interactive: Bool { !jsonl && Console.isTerminal }

    /// Colours only for people, and not for those who said no.
    var colors: Bool {
        guard interactive, !noColor else { return false }
        return (ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
    }
}
