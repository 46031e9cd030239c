import ArgumentParser
import Foundation
import MoonwireLua

/// How `connect` and `listen` show messages and read input: the flags both take.
struct SessionOptions: ParsableArguments {
    enum BinaryForm: String, ExpressibleByArgument, CaseIterable {
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

    @Option(help: ArgumentHelp("A .proto file for --type (repeatable).", valueName: "file"))
    var proto: [String] = []

    // Hidden from --help to keep it one screen; docs/cli.md has it.
    @Option(help: ArgumentHelp("Where the .proto files' imports are (repeatable).", valueName: "dir", visibility: .hidden))
    var protoPath: [String] = []

    @Option(help: ArgumentHelp("Each message is this Protocol Buffers type.", valueName: "name"))
    var type: String?

    func validateProtobuf() throws {
        if !proto.isEmpty && type == nil { throw ValidationError("--proto needs --type NAME, the message type of every message") }
        if proto.isEmpty && type != nil { throw ValidationError("--type needs --proto FILE, the .proto file that defines it") }
        if !proto.isEmpty && hexInput { throw ValidationError("--binary and --proto both say how lines are sent; give one") }
    }

    /// --proto and --type: binary messages shown decoded, lines encoded (nil without them).
    func makeProtobuf() throws -> ProtobufConsole? {
        guard let type, !proto.isEmpty else { return nil }
        do {
            return try ProtobufConsole(files: proto, importPaths: protoPath, type: type)
        } catch {
            throw ValidationError("--proto: \(error)")
        }
    }

    /// Line editor and prompt: stdin and stdout are terminals, and no machine output was asked for.
    var interactive: Bool { !jsonl && Console.isTerminal }

    /// Colours only for people, and not for those who said no.
    var colors: Bool {
        guard interactive, !noColor else { return false }
        return (ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
    }
}
