import ArgumentParser
import Foundation
import MoonwireCore
import MoonwireLua
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// `--record FILE` and `--record-secrets`, for `run` (and `connect`).
struct RecordOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Record every event as JSON Lines (docs/recording.md).", valueName: "file"))
    var record: String?

    @Flag(help: "Keep secrets (Authorization, cookies, tokens) in it.")
    var recordSecrets = false

    /// nil without --record; a file that cannot be written is a usage error (exit 2).
    func makeRecorder(url: String? = nil, headers: [(String, String)] = []) throws -> SessionRecorder? {
        guard let record else { return nil }
        do {
            return try SessionRecorder(path: record, toolVersion: ScriptRuntime.version, url: url, headers: headers, recordSecrets: recordSecrets)
        } catch {
            throw ValidationError("--record: \(error)")
        }
    }
}

struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show or replay a recorded session: as a mock server, as a client, or as a generated test.",
        discussion: """
            --show                 print the recorded events (the default): binary messages \
            decoded with --msgpack, --cbor or --proto F --type T, else as hex
            --serve URL            play the recorded server's side to each client
            --client [URL]         play the client's side (default: the recorded URL)
            --generate-test -o F   write a test file for 'moonwire test'
            --from-har H -o F      import a browser's HAR export (no FILE)

            JSON messages match as values, and so do binary ones with --msgpack, --cbor \
            or --proto F --type T (else byte for byte); --ignore leaves fields out (id anywhere, \
            user.id from the top, array positions as [1], $.a[0].id, or *[1] in every \
            array) and --match loose lets a message have more fields \
            than recorded. A client message that differs ends its session with close \
            code 4400 and the difference on stderr. Exit: 0 when every exchange \
            matched, 1 when one did not, 2 for bad input (the file and line are named).
            """
    )

    enum Match: String, ExpressibleByArgument {
        case exact, loose
    }

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The recording (JSON Lines, from --record or --from-har).")
    var file: String?

    @Argument(help: "With --client: the server to play against (default: the recorded URL).")
    var url: String?

    @Option(help: ArgumentHelp("Serve the recorded server's side on this URL (port 0: any free port, printed on stdout).", valueName: "url"))
    var serve: String?

    @Flag(help: "Play the recorded client's side against a server.")
    var client = false

    @Flag(help: "Print the recorded events, one a line (the default without --serve, --client or --generate-test).")
    var show = false

    @Flag(help: "Write a test file for 'moonwire test' (with -o).")
    var generateTest = false

    @Option(name: .customLong("from-har"), help: ArgumentHelp("Import a browser's HAR export (with -o).", valueName: "har"))
    var fromHAR: String?

    @Option(name: .shortAndLong, help: "Where --generate-test and --from-har write.")
    var output: String?

    @Option(help: ArgumentHelp("JSON fields left out of matching, comma-separated: id,ts,user.id, positions such as [1], $.a[0].id, *[1]", valueName: "fields"))
    var ignore: [String] = []

    @Option(help: "exact, or loose: a JSON message may have more fields than recorded.")
    var match: Match = .exact

    @Option(help: "Recorded delays divided by this; 0 sends at once.")
    var speed: Double = 1

    @Option(help: "Seconds to wait for each expected reply (--client, and in generated tests).")
    var timeout: Double = 5

    @Option(help: "Which recorded connection to replay (default: the first with messages).")
    var connection: Int?

    @Flag(help: "With --serve: exit after the first client's session, 0 if it matched, else 1.")
    var once = false

    @Flag(help: "With --from-har: keep Authorization, Cookie and token-like headers.")
    var recordSecrets = false

    @OptionGroup(title: "Binary messages (--show, --serve, --client)") var codec: ConsoleCodecOptions

    func validate() throws {
        let modes = [show, serve != nil, client, generateTest, fromHAR != nil].filter { $0 }.count
        guard modes <= 1 else { throw ValidationError("give one of --show, --serve URL, --client, --generate-test or --from-har FILE") }
        try codec.validate()
        if let flag = codec.flag, generateTest || fromHAR != nil {
            throw ValidationError("\(flag) is for --show, --serve and --client (binary messages shown decoded, and matched as values)")
        }
        if fromHAR != nil {
            guard file == nil else { throw ValidationError("--from-har takes the HAR file: moonwire replay --from-har FILE.har -o FILE.jsonl") }
        } else if file == nil {
            throw ValidationError("give the recording to replay: moonwire replay FILE ...")
        }
        if (generateTest || fromHAR != nil) && output == nil { throw ValidationError("give -o FILE for what is written") }
        if url != nil && !client { throw ValidationError("a URL after the recording is for --client; --serve takes its own") }
        guard speed >= 0, speed.isFinite else { throw ValidationError("--speed must be 0 (at once) or more") }
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be more than 0 seconds") }
        for path in ignorePaths {
            do {
                _ = try IgnorePath(path)
            } catch {
                throw ValidationError(error.description)
            }
        }
    }

    /// `--show`, or no mode at all.
    var showing: Bool { show || (serve == nil && !client && !generateTest && fromHAR == nil) }

    /// `--ignore a,b --ignore c`: each path once.
    var ignorePaths: [String] {
        ignore.flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }.filter { !$0.isEmpty }
    }

    var matcher: MessageMatcher {
        MessageMatcher(ignore: ignorePaths, loose: match == .loose)
    }

    /// The matcher of `--serve` and `--client`: binary messages matched as the values
    /// they decode to with a codec flag.
    func replayMatcher() throws -> MessageMatcher {
        var matcher = self.matcher
        if let codec = try codec.make() {
            let shared = SharedCodec(codec)
            matcher.binaryFormat = MessageMatcher.BinaryFormat(
                json: { bytes in try? shared.codec.json(of: bytes).get() },
                text: { bytes in shared.text(of: bytes) }
            )
        }
        return matcher
    }

    func run() throws {
        do {
            if let har = fromHAR {
                let (connections, messages) = try HARImport.convert(har: har, to: output!, toolVersion: ScriptRuntime.version, recordSecrets: recordSecrets)
                print("\(output!): \(connections) connection\(connections == 1 ? "" : "s"), \(messages) messages")
                return
            }
            if showing {
                let show = ReplayShow(codec: try codec.make(), connection: connection)
                try show.run(path: file!) { print($0) }
                return
            }
            let conversation = try RecordingReader.conversation(path: file!, connection: connection)
            if generateTest {
                let lua = ReplayTestGenerator.lua(conversation, source: file!, output: output!, matcher: matcher, timeout: timeout)
                do {
                    try lua.write(toFile: output!, atomically: true, encoding: .utf8)
                } catch {
                    throw ValidationError("cannot write '\(output!)': \(error.localizedDescription)")
                }
                print("\(output!): \(conversation.exchanges.count) exchanges")
            } else if let serve {
                try self.serve(conversation, on: serve)
            } else {
                try play(conversation)
            }
        } catch let error as RecordingError {
            ScriptRuntime.writeToStderr("moonwire: \(error)")
            throw ExitCode(2)
        }
    }

    private func serve(_ conversation: RecordedConversation, on text: String) throws {
        let url: ServerURL
        do {
            url = try ServerURL(text)
        } catch {
            throw ValidationError("--serve: \(error)")
        }
        let group = try LoopGroup.make(threads: 1)
        let loop = group.next()
        let replay = ReplayServer(conversation: conversation, matcher: try replayMatcher(), speed: speed)
        replay.report = { line in
            ScriptRuntime.writeToStderr(line)
        }
        let ended = loop.makePromise(of: Int32.self)
        let once = self.once
        replay.onSessionEnd = { outcome in
            if once { ended.succeed(outcome.failure == nil ? 0 : 1) }
        }
        let options = MessageServerOptions(protocols: conversation.subprotocol.map { [$0] } ?? [])
        let server: MessageServer
        do {
            server = try loop.submit { () throws -> MessageServer in
                let s = try MessageServer(url: url, options: options, eventLoop: loop)
                s.delegate = replay
                return s
            }.wait()
        } catch {
            throw ValidationError("--serve: \(error)")
        }
        let bound = try loop.submit { server.url.description }.wait()
        print("replaying \(file!) (connection \(conversation.connection), \(conversation.exchanges.count) exchanges) on \(bound)")
        fflush(stdout)
        let code = try ended.futureResult.wait()
        _ = try? loop.flatSubmit { server.close() }.wait()
        ProcessEnd.exit(code, parking: [loop])
    }

    private func play(_ conversation: RecordedConversation) throws {
        guard let text = url ?? conversation.url else {
            throw ValidationError("the recording has no URL: give one after it, moonwire replay FILE --client ws://host/path")
        }
        let target: TransportURL
        do {
            target = try TransportURL(text)
        } catch {
            throw ValidationError("'\(text)': \(error)")
        }
        let group = try LoopGroup.make(threads: 1)
        let loop = group.next()
        var configuration = ManagedConnection.Configuration()
        configuration.heartbeat = nil
        let matcher = try replayMatcher()
        let replay = try loop.submit {
            let r = ReplayClient(
                conversation: conversation, url: target, matcher: matcher, speed: speed,
                timeout: .nanoseconds(Int64(timeout * 1e9)), configuration: configuration, eventLoop: loop
            )
            r.report = { print($0) }
            r.start()
            return r
        }.wait()
        let failure = try replay.result.wait()
        if let failure {
            ScriptRuntime.writeToStderr("moonwire: replay failed at \(failure)")
        } else {
            print("all \(conversation.exchanges.count) exchanges matched")
        }
        // The close goes out before the process ends.
        _ = try? loop.submit {}.wait()
        ProcessEnd.exit(failure == nil ? 0 : 1, parking: [loop])
    }
}

/// A replay's console codec, for its matcher: one Lua state, used by one replay on its
/// event loop (the matcher's closures are Sendable only so that it can be handed there).
private final class SharedCodec: @unchecked Sendable {
    let codec: ConsoleCodec

    init(_ codec: ConsoleCodec) {
        self.codec = codec
    }

    func text(of bytes: [UInt8]) -> String {
        ReplayShow.binaryText(bytes, codec: codec)
    }
}
