import ArgumentParser
import Foundation
import MoonwireCore
import MoonwireLua
import NIOCore
import NIOPosix

struct Connect: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Talk to a WebSocket or TCP server by hand or by pipe.",
        discussion: """
            /help lists the commands. Exit: 0 after a 1000/1001 close, 1 after another \
            or a failed connect, 2 for bad usage, 130 after Ctrl-C (docs/cli.md).
            """
    )

    /// Accepted as everywhere; hidden so that --help fits one screen.
    @OptionGroup(visibility: .hidden) var global: GlobalOptions

    @Option(name: [.customShort("x"), .long], help: ArgumentHelp("Send this after connecting (repeatable).", valueName: "message"))
    var execute: [String] = []

    @Option(name: [.short, .long], help: ArgumentHelp("Stay this long after input ends.", valueName: "seconds"))
    var wait: Double?

    @OptionGroup(title: "Connection") var options: ConnectFlags

    @OptionGroup(title: "Display") var session: SessionOptions

    @OptionGroup(title: "Recording") var recording: RecordOptions

    @OptionGroup var protocols: ConnectProtocol.Options

    @Argument(help: "A ws://, wss://, tcp:// or tls:// URL; without a scheme, ws:// (as wscat).")
    var url: String

    /// The URL to dial. Plain connect takes wscat's rule, a URL without a scheme is a
    /// WebSocket one (`localhost:8080` is `ws://localhost:8080`); with --protocol the
    /// module's schemes apply (socket.io's http://, mqtt://), so there is no default.
    var dialled: String {
        protocols.name == nil && !url.contains("://") ? "ws://" + url : url
    }

    func validate() throws {
        if let wait { _ = try ArgumentValues.seconds(wait, flag: "--wait") }
        _ = try ArgumentValues.seconds(options.heartbeat, flag: "--heartbeat")
        try session.validateCodec()
    }

    /// Where to connect and how, from the flags; also the largest message.
    func makeConfiguration() throws -> (TransportURL, ManagedConnection.Configuration, Int) {
        let target: TransportURL
        do {
            target = try TransportURL(dialled)
        } catch {
            throw ValidationError("\(error); give a URL such as ws://127.0.0.1:9000/ or tcp://127.0.0.1:7000")
        }
        let maxBytes = try options.session.maxMessageBytes()
        var configuration = ManagedConnection.Configuration()
        var dial = DialOptions()
        dial.tls.caFile = options.ca
        dial.tls.insecure = options.insecure
        configuration.queueLimit = ConnectSession.queueLimit
        configuration.reconnect = options.reconnect ? ReconnectPolicy() : nil
        configuration.heartbeat = nil
        if !options.autoReply.isEmpty {
            configuration.autoReply = AutoReply(try options.autoReply.map { rule in
                guard let equals = rule.firstIndex(of: "="), equals != rule.startIndex else {
                    throw ValidationError("--auto-reply '\(rule)' has no MATCH=REPLY; write it as --auto-reply '2=3'")
                }
                return AutoReply.Rule(match: Array(rule[..<equals].utf8), reply: Array(rule[rule.index(after: equals)...].utf8))
            })
        }
        configuration.heartbeat = try options.heartbeatSetting()
        switch target {
        case .webSocket:
            try options.session.checkWebSocket()
            configuration.socket.protocols = options.subprotocol
            configuration.socket.compress = options.compress
            configuration.socket.maxMessage = maxBytes
            for line in options.header {
                guard let colon = line.firstIndex(of: ":"), line[..<colon].contains(where: { !$0.isWhitespace }) else {
                    throw ValidationError("-H '\(line)' is not a header; write it as -H 'Name: value'")
                }
                configuration.socket.headers.append((
                    line[..<colon].trimmingCharacters(in: .whitespaces),
                    line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                ))
            }
        case .tcp:
            configuration.tcp.framing = try options.session.tcpFraming(
                max: maxBytes, alsoWebSocketOnly: [("-H", !options.header.isEmpty), ("--heartbeat", options.heartbeat > 0)])
        }
        if let proxy = options.proxy {
            let choice: ProxyChoice
            do {
                choice = proxy == "none" ? .direct : .through(try ProxySettings(proxy))
            } catch {
                throw ValidationError("--proxy \(error)")
            }
            dial.proxy = choice
        }
        configuration.socket.dial = dial
        configuration.tcp.dial = dial
        return (target, configuration, maxBytes)
    }

    func run() throws {
        if protocols.name != nil { return try ConnectProtocol(connect: self).run() }
        let (target, configuration, maxBytes) = try makeConfiguration()
        let console = Console(interactive: session.interactive, prompt: "> ", colors: session.colors)
        let printer = SessionPrinter(console: console, options: session, kindless: !target.isWebSocket)
        printer.codec = try session.codec.make()
        let group = try LoopGroup.make(threads: 1)
        let loop = group.next()
        let settings = ConnectSession.Settings(execute: execute, wait: wait, hexInput: session.hexInput, maxFile: maxBytes)
        let recorder = try recording.makeRecorder(url: dialled, headers: configuration.socket.headers)?
            .connection(url: dialled, headers: configuration.socket.headers)
        let connection = try loop.submit {
            ConnectSession(
                url: target, configuration: configuration, settings: settings, printer: printer, recorder: recorder, eventLoop: loop)
        }.wait()
        let signals = SignalTrap(onSignal: { signal in loop.execute { connection.interrupt(signal) } }, beforeExit: console.restoreTerminalNow)
        let code = try loop.flatSubmit { connection.start() }.wait()
        signals.cancel()
        console.finish()
        ProcessEnd.exit(code, parking: [loop])
    }
}

extension TransportURL {
    var isWebSocket: Bool {
        if case .webSocket = self { return true }
        return false
    }
}
