import ArgumentParser
import MoonwireCore
import MoonwireLua

/// The flags of `connect` and `listen` that set an option of `mw.connect` / `mw.listen`
/// take their name and help from the option's declaration (OptionDeclarations.all); they sit
/// in each command's "Connection" group, which a test holds against the declarations.
func declared(_ name: String, _ command: SessionOption.Role) -> SessionOption.Flag {
    OptionDeclarations.flag(name, of: command)
}

extension SessionOption.Flag {
    /// `--name`, and `-x` when it has a short name.
    var names: NameSpecification {
        if let short { return [.customShort(short), .customLong(name)] }
        return [.customLong(name)]
    }

    /// Its `--help` line.
    var argumentHelp: ArgumentHelp { ArgumentHelp(help, valueName: valueName) }
}

/// Which command's declarations a flag takes its name and help from.
protocol FlagRole {
    static var role: SessionOption.Role { get }
}

enum ConnectRole: FlagRole { static let role = SessionOption.Role.connect }
enum ListenRole: FlagRole { static let role = SessionOption.Role.listen }

/// The flags `connect` and `listen` both have, each with its own command's name and help
/// (the same option of `mw.connect` and of `mw.listen`), and their checks: declared once.
struct SessionFlags<Role: FlagRole>: ParsableArguments {
    @Option(name: declared("subprotocol", Role.role).names, help: declared("subprotocol", Role.role).argumentHelp)
    var subprotocol: [String] = []

    @Option(name: declared("framing", Role.role).names, help: declared("framing", Role.role).argumentHelp)
    var framing: String?

    @Option(name: declared("max-message", Role.role).names, help: declared("max-message", Role.role).argumentHelp)
    var maxMessage = "16M"

    @Flag(name: declared("compress", Role.role).names, help: declared("compress", Role.role).argumentHelp)
    var compress = false

    /// `--max-message` in bytes.
    func maxMessageBytes() throws -> Int {
        try ArgumentValues.size(maxMessage, flag: "--max-message")
    }

    /// A WebSocket URL's check: `--framing` is misuse.
    func checkWebSocket() throws {
        guard framing == nil else { throw ValidationError("--framing is for tcp:// and tls:// URLs; a WebSocket frames its messages itself") }
    }

    /// A TCP URL's framing (line unless told), after checking that no flag only a WebSocket
    /// has is used: these, and the command's own in `alsoWebSocketOnly`.
    func tcpFraming(max: Int, alsoWebSocketOnly own: [(flag: String, used: Bool)] = []) throws -> TCPFraming {
        for (flag, used) in own + [("--subprotocol", !subprotocol.isEmpty), ("--compress", compress)] where used {
            throw ValidationError("\(flag) is for ws:// and wss:// URLs; TCP has no handshake or ping")
        }
        return try ArgumentValues.framing(framing ?? "line", max: max)
    }
}

/// `connect`'s flags that set an option of `mw.connect`.
@dynamicMemberLookup
struct ConnectFlags: ParsableArguments {
    @Option(name: declared("header", .connect).names, help: declared("header", .connect).argumentHelp)
    var header: [String] = []

    @OptionGroup var session: SessionFlags<ConnectRole>

    subscript<T>(dynamicMember shared: KeyPath<SessionFlags<ConnectRole>, T>) -> T { session[keyPath: shared] }

    @Option(name: declared("heartbeat", .connect).names, help: declared("heartbeat", .connect).argumentHelp)
    var heartbeat: Double = 0

    @Option(name: declared("auto-reply", .connect).names, help: declared("auto-reply", .connect).argumentHelp)
    var autoReply: [String] = []

    @Flag(name: declared("reconnect", .connect).names, help: declared("reconnect", .connect).argumentHelp)
    var reconnect = false

    @Option(name: declared("ca", .connect).names, help: declared("ca", .connect).argumentHelp)
    var ca: String?

    @Flag(name: declared("insecure", .connect).names, help: declared("insecure", .connect).argumentHelp)
    var insecure = false

    @Option(name: declared("proxy", .connect).names, help: declared("proxy", .connect).argumentHelp)
    var proxy: String?

    /// `--heartbeat S` as `heartbeat = { interval = S }` (0: none), checked where the
    /// option is.
    func heartbeatSetting() throws -> HeartbeatMonitor.Configuration? {
        guard heartbeat != 0 else { return nil }
        do {
            return try HeartbeatOption.client(interval: heartbeat)
        } catch {
            throw ValidationError("--heartbeat \(error.message)")
        }
    }
}

/// `listen`'s flags that set an option of `mw.listen`.
@dynamicMemberLookup
struct ListenFlags: ParsableArguments {
    @OptionGroup var session: SessionFlags<ListenRole>

    subscript<T>(dynamicMember shared: KeyPath<SessionFlags<ListenRole>, T>) -> T { session[keyPath: shared] }

    @Option(name: declared("tls-cert", .listen).names, help: declared("tls-cert", .listen).argumentHelp)
    var tlsCert: String?

    @Option(name: declared("tls-key", .listen).names, help: declared("tls-key", .listen).argumentHelp)
    var tlsKey: String?
}
