import ArgumentParser
import MoonwireLua

/// `--proto FILE --type NAME`, `--msgpack`, `--cbor`: the format binary messages are
/// shown decoded in (and typed lines encoded to), for `connect`, `listen` and `replay`.
struct ConsoleCodecOptions: ParsableArguments {
    @Option(help: ArgumentHelp("A .proto file for --type (repeatable).", valueName: "file"))
    var proto: [String] = []

    // Hidden from --help to keep it one screen; docs/cli.md has it.
    @Option(help: ArgumentHelp("Where the .proto files' imports are (repeatable).", valueName: "dir", visibility: .hidden))
    var protoPath: [String] = []

    @Option(help: ArgumentHelp("Each message is this Protocol Buffers type.", valueName: "name"))
    var type: String?

    /// `--msgpack` and `--cbor`: one line of --help; more than one given is a usage error.
    enum Pack: String, EnumerableFlag {
        case msgpack, cbor
    }

    @Flag(help: "Binary messages are MessagePack or CBOR.")
    var pack: [Pack] = []

    var msgpack: Bool { pack.contains(.msgpack) }
    var cbor: Bool { pack.contains(.cbor) }

    /// The flag given, for messages (nil without one).
    var flag: String? {
        if !proto.isEmpty { return "--proto" }
        return pack.first.map { "--\($0.rawValue)" }
    }

    func validate() throws {
        if !proto.isEmpty && type == nil { throw ValidationError("--proto needs --type NAME, the message type of every message") }
        if proto.isEmpty && type != nil { throw ValidationError("--type needs --proto FILE, the .proto file that defines it") }
        if !protoPath.isEmpty && proto.isEmpty { throw ValidationError("--proto-path is for --proto FILE, where its imports are") }
        let given = (proto.isEmpty ? [] : ["--proto"]) + Set(pack).sorted { $0.rawValue > $1.rawValue }.map { "--\($0.rawValue)" }
        if given.count > 1 {
            throw ValidationError("\(given.joined(separator: " and ")) each say what binary messages are; give one of --proto FILE --type NAME, --msgpack or --cbor")
        }
    }

    /// The console codec the flags ask for (nil without one); a .proto file that does
    /// not load is a usage error.
    func make() throws -> ConsoleCodec? {
        let format: ConsoleCodec.Format
        if let type, !proto.isEmpty {
            format = .protobuf(files: proto, importPaths: protoPath, type: type)
        } else if msgpack {
            format = .msgpack
        } else if cbor {
            format = .cbor
        } else {
            return nil
        }
        do {
            return try ConsoleCodec(format)
        } catch {
            throw ValidationError("\(flag ?? "--proto"): \(error)")
        }
    }
}
