import ArgumentParser
import Foundation
import Logging
import MoonwireCore
import MoonwireLua
import NIOCore
import NIOPosix

/// `moonwire connect --protocol NAME URL`: a protocol spoken by hand. The Swift side only
/// reads the flags and owns the console; the shipped driver (connect_protocol.lua) requires
/// the protocol's module, connects, turns each typed line into one of the module's
/// commands and shows what comes back decoded, through the same printer as `connect`.
struct ConnectProtocol {
    struct Options: ParsableArguments {
        @Option(name: .customLong("protocol"), help: ArgumentHelp("Speak mqtt, socketio, graphql-ws, stomp or ocpp.", valueName: "name"))
        var name: String?

        /// Hidden so that connect's --help still fits one screen; docs/cli.md and the man page have it.
        @Option(name: [.customShort("o"), .customLong("option")], help: ArgumentHelp(
            "With --protocol: an option of its module's connect, as -o client_id=bot (repeatable).", valueName: "key=value",
            visibility: .hidden))
        var option: [String] = []
    }

    /// The names --protocol takes, and the module each one requires.
    static let modules = [
        "mqtt": "mqtt", "socketio": "socketio", "socket.io": "socketio", "graphql-ws": "graphql_ws",
        "graphql_ws": "graphql_ws", "stomp": "stomp", "ocpp": "ocpp",
    ]

    let connect: Connect

    func run() throws {
        let options = try driverOptions()
        let session = connect.session
        let console = Console(interactive: session.interactive, prompt: "", colors: session.colors, mode: .asking)
        let printer = SessionPrinter(console: console, options: session, kindless: false)
        let group = try LoopGroup.make(threads: 1)
        let loop = group.next()
        let logger = Logger(label: "moonwire") { _ in MoonwireLogHandler(level: .info, format: .text) }
        let io = LuaInterpreter.IO(
            writeLine: { line in console.write(Array(line) + [0x0A]) },
            writeError: { console.write($0, to: .err) },
            ask: { console.ask($0) },
            show: { shown in
                let direction = SessionPrinter.Direction(rawValue: shown.direction) ?? .local
                if shown.isMessage {
                    printer.message(Array(shown.text.utf8), binary: false, direction: direction, kind: shown.kind)
                } else {
                    printer.event(shown.kind, shown.text, direction: direction, isError: shown.isError)
                }
            }
        )
        let interpreter = LuaInterpreter.connectProtocol(eventLoop: loop, arguments: [options], logger: logger, io: io)
        let signals = SignalTrap(onSignal: { interpreter.shutdown(signal: $0) }, beforeExit: console.restoreTerminalNow)
        console.start(on: loop, onLine: { interpreter.enter($0) }, onEnd: { interpreter.enter(nil) })
        let code: Int32
        do {
            code = try interpreter.run().wait()
        } catch {
            ScriptRuntime.writeToStderr("moonwire connect: \(error)")
            code = 1
        }
        signals.cancel()
        console.finish()
        ProcessEnd.exit(code, parking: [loop])
    }

    /// What the driver gets: the protocol, the URL and connect's flags that apply, as JSON.
    func driverOptions() throws -> String {
        let name = connect.protocols.name ?? ""
        guard let module = Self.modules[name.lowercased()] else {
            throw ValidationError("--protocol '\(name)' is not one moonwire speaks; give mqtt, socketio, graphql-ws, stomp or ocpp")
        }
        let session = connect.session
        for (flag, used) in [
            ("--framing", connect.options.framing != nil), ("--binary", session.hexInput), ("--heartbeat", connect.options.heartbeat > 0),
            ("--record", connect.recording.record != nil), (session.codec.flag ?? "", session.codec.flag != nil),
        ] where used {
            throw ValidationError("\(flag) is for plain connect; with --protocol the module frames and pings itself")
        }
        // connect's own checks of the URL and of -H, --subprotocol, --proxy: on the
        // transport the module dials (socket.io's http:// is a WebSocket, mqtt:// is TCP).
        var transport = connect
        for (scheme, dialled) in [("http://", "ws://"), ("https://", "wss://"), ("mqtt://", "tcp://"), ("mqtts://", "tls://")]
        where transport.url.lowercased().hasPrefix(scheme) {
            transport.url = dialled + transport.url.dropFirst(scheme.count)
        }
        let (_, configuration, _) = try transport.makeConfiguration()
        var set: [String: Any] = [:]
        for pair in connect.protocols.option {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw ValidationError("-o '\(pair)' is not an option; write it as -o key=value, as in -o client_id=bot")
            }
            let value = String(pair[pair.index(after: equals)...])
            set[String(pair[..<equals])] = (try? JSONSerialization.jsonObject(with: Data(value.utf8), options: [.fragmentsAllowed])) ?? value
        }
        var tls: [String: Any] = [:]
        if let ca = connect.options.ca { tls["ca"] = ca }
        if connect.options.insecure { tls["insecure"] = true }
        var options: [String: Any] = [
            "protocol": name.lowercased(), "module": module, "url": connect.url, "interactive": session.interactive,
            "headers": Dictionary(configuration.socket.headers, uniquingKeysWith: { _, last in last }),
            "subprotocols": connect.options.subprotocol, "execute": connect.execute, "set": set, "tls": tls,
            "reconnect": connect.options.reconnect,
        ]
        if let proxy = connect.options.proxy { options["proxy"] = proxy }
        if connect.options.compress { options["compress"] = true }
        if let wait = connect.wait { options["wait"] = wait }
        let data = try JSONSerialization.data(withJSONObject: options, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }
}
