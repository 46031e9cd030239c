import ArgumentParser
import Foundation
import MoonwireCore
import MoonwireLua
import NIOCore
import NIOPosix

struct Listen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A one-command server: shows peers, sends them input.",
        discussion: """
            Peers are numbered from 1 in the order they connect. At a terminal: /to ID \
            message, /close [ID [code [reason]]], /peers, /help. Ctrl-C closes every peer \
            with 1001 and exits 130; at a terminal Ctrl-D does the same and exits 0. \
            When input is a pipe, its end leaves the server running. See docs/cli.md.
            """
    )

    /// Accepted as everywhere; hidden so that --help fits one screen.
    @OptionGroup(visibility: .hidden) var global: GlobalOptions

    @Flag(help: "Send every message back to the peer that sent it.")
    var echo = false

    @Flag(help: "Send every message on to all the other peers.")
    var relay = false

    @Option(help: ArgumentHelp("Hand every event to this Lua file's on_connect, on_message and on_close.", valueName: "file"))
    var script: String?

    @OptionGroup(title: "Connection") var options: ListenFlags

    @OptionGroup(title: "Display") var session: SessionOptions

    @OptionGroup(title: "Limits of a script") var limits: LimitOptions

    @Argument(help: "Where to listen: ws://HOST:PORT[/path], tcp://HOST:PORT, or a port (0 picks a free one).")
    var url: String

    func makeOptions() throws -> (ServerURL, MessageServerOptions) {
        let text = Int(url).map { "ws://127.0.0.1:\($0)/" } ?? url
        var target: ServerURL
        do {
            target = try ServerURL(text)
        } catch {
            throw ValidationError("\(error); give a URL such as ws://127.0.0.1:9000/ or tcp://127.0.0.1:7000")
        }
        let maxBytes = try options.session.maxMessageBytes()
        var server = MessageServerOptions()
        server.maxMessage = maxBytes
        server.protocols = options.subprotocol
        server.compress = options.compress
        if options.tlsCert != nil || options.tlsKey != nil {
            guard let tlsCert = options.tlsCert else { throw ValidationError("--tls-key needs --tls-cert, the certificate it belongs to") }
            target.secure = true
            server.tls.certificateFile = tlsCert
            server.tls.privateKeyFile = options.tlsKey
        } else if target.secure {
            throw ValidationError("\(target.scheme):// needs a certificate: add --tls-cert FILE (and --tls-key FILE)")
        }
        switch target.kind {
        case .webSocket:
            try options.session.checkWebSocket()
        case .tcp:
            server.framing = try options.session.tcpFraming(max: maxBytes)
        }
        return (target, server)
    }

    func validate() throws {
        try session.validateCodec()
    }

    func run() throws {
        let (target, options) = try makeOptions()
        if let script { try ScriptFile.checkReadable(script) }
        let console = Console(interactive: session.interactive, prompt: "> ", colors: session.colors)
        let printer = SessionPrinter(console: console, options: session, kindless: target.kind == .tcp)
        printer.codec = try session.codec.make()
        let group = try LoopGroup.make(threads: 1)
        let loop = group.next()
        let server = ListenSession(
            settings: .init(
                echo: echo, relay: relay, hexInput: session.hexInput,
                sendBudget: try limits.sendBudget.bytes() ?? SendBudgetPool.defaultBudget
            ),
            printer: printer, eventLoop: loop
        )
        let signals: SignalTrap
        var scripted: ListenSession.Script?
        if let script {
            // The server's events go on to the file's handlers in a Lua state (as `run`'s):
            // a signal ends the script, which closes the server with it.
            let runtime = ScriptRuntime(
                eventLoop: loop,
                options: .init(
                    keepGoing: false, logger: global.makeLogger(), reportError: { [global] in global.reportError($0) }, worker: 1, workers: 1,
                    limits: try limits.limits(), searchPath: ModuleSearchPath(script: script)
                )
            )
            scripted = .init(serve: { runtime.serve($0, observer: $1, script: script) }, stop: { runtime.stop(exitCode: $0) })
            signals = SignalTrap(onSignal: { runtime.shutdown(signal: $0) }, beforeExit: console.restoreTerminalNow)
        } else {
            signals = SignalTrap(onSignal: { signal in loop.execute { server.interrupt(signal) } }, beforeExit: console.restoreTerminalNow)
        }
        let code = try loop.flatSubmit { server.start(target, options: options, script: scripted) }.wait()
        signals.cancel()
        console.finish()
        ProcessEnd.exit(code, parking: [loop])
    }
}
