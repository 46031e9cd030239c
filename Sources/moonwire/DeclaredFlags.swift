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

/// `connect`'s flags that set an option of `mw.connect`.
struct ConnectFlags: ParsableArguments {
    @Option(name: declared("header", .connect).names, help: declared("header", .connect).argumentHelp)
    var header: [String] = []

    @Option(name: declared("subprotocol", .connect).names, help: declared("subprotocol", .connect).argumentHelp)
    var subprotocol: [String] = []

    @Option(name: declared("framing", .connect).names, help: declared("framing", .connect).argumentHelp)
    var framing: String?

    @Option(name: declared("max-message", .connect).names, help: declared("max-message", .connect).argumentHelp)
    var maxMessage = "16M"

    @Option(name: declared("heartbeat", .connect).names, help: declared("heartbeat", .connect).argumentHelp)
    var heartbeat: Double = 0

    @Option(name: declared("auto-reply", .connect).names, help: declared("auto-reply", .connect).argumentHelp)
    var autoReply: [String] = []

    @Flag(name: declared("reconnect", .connect).names, help: declared("reconnect", .connect).argumentHelp)
    var reconnect = false

    @Flag(name: declared("compress", .connect).names, help: declared("compress", .connect).argumentHelp)
    var compress = false

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
struct ListenFlags: ParsableArguments {
    @Option(name: declared("subprotocol", .listen).names, help: declared("subprotocol", .listen).argumentHelp)
    var subprotocol: [String] = []

    @Option(name: declared("framing", .listen).names, help: declared("framing", .listen).argumentHelp)
    var framing: String?

    @Option(name: declared("max-message", .listen).names, help: declared("max-message", .listen).argumentHelp)
    var maxMessage = "16M"

    @Flag(name: declared("compress", .listen).names, help: declared("compress", .listen).argumentHelp)
    var compress = false

    @Option(name: declared("tls-cert", .listen).names, help: declared("tls-cert", .listen).argumentHelp)
    var tlsCert: String?

    @Option(name: declared("tls-key", .listen).names, help: declared("tls-key", .listen).argumentHelp)
    var tlsKey: String?
}
