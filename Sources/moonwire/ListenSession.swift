import Foundation
import MoonwireCore
import NIOCore

/// The `listen` command's server: peers' events to the console, input lines to peers.
/// Lives on its event loop; every method runs there.
final class ListenSession: MessageServerDelegate, @unchecked Sendable {
    struct Settings {
        var echo: Bool
        var relay: Bool
        var hexInput: Bool
        /// The process-wide send budget of the peers without a script; 0 for no limit.
        var sendBudget: Int
    }

    private let settings: Settings
    private let printer: SessionPrinter
    private let eventLoop: EventLoop
    private var server: MessageServer?
    private var done: EventLoopPromise<Int32>?
    private var exitCode: Int32 = 0

    init(settings: Settings, printer: SessionPrinter, eventLoop: EventLoop) {
        self.settings = settings
        self.printer = printer
        self.eventLoop = eventLoop
    }

    /// `listen --script`: the Lua state the server's events go on to, once this
    /// session has shown them. It decides when the session ends.
    struct Script {
        /// Hands the server to the script, with this session as the observer; the exit code.
        var serve: (MessageServer, any MessageServerDelegate) -> EventLoopFuture<Int32>
        /// Ends the script (and so the session) with an exit code.
        var stop: (Int32) -> Void
    }

    private var script: Script?

    /// Listens and reads input; the future gives the exit code.
    func start(_ url: ServerURL, options: MessageServerOptions, script: Script? = nil) -> EventLoopFuture<Int32> {
        let promise = eventLoop.makePromise(of: Int32.self)
        done = promise
        self.script = script
        do {
            let server = try MessageServer(url: url, options: options, eventLoop: eventLoop)
            self.server = server
            printer.event("listen", "listening on \(server.url)", fields: [("url", LogLine.jsonString(server.url.description))])
            if let script {
                script.serve(server, self).cascade(to: promise)
            } else {
                server.delegate = self
                server.sendBudget = sendBudget()
            }
        } catch {
            printer.event("error", "cannot listen on \(url): \(error)", isError: true)
            promise.succeed(1)
            return promise.futureResult
        }
        printer.console.start(on: eventLoop, onLine: handle, onEnd: inputEnded)
        return promise.futureResult
    }

    /// The peers' process-wide send budget (a script has its own, which it can change).
    private func sendBudget() -> SendBudgetPool {
        let pool = SendBudgetPool(budget: settings.sendBudget, eventLoop: eventLoop)
        // Weak: the pool keeps this closure.
        pool.onFirstReached = { [printer, weak pool] in
            guard let pool else { return }
            printer.event(
                "warning",
                "the process send budget \(pool.described) is reached: messages to slow peers are dropped until it falls under half; raise it with --send-budget",
                isError: true)
        }
        return pool
    }

    // MARK: Input

    func handle(_ line: String) {
        switch SessionInput(line) {
        case .message(let text):
            guard let (bytes, binary) = payload(text) else { return }
            let reached = peers(nil).filter { send(bytes, binary: binary, to: $0) }.count
            if reached == 0 { return printer.complaint("not sent: no peer is connected") }
            printer.message(bytes, binary: binary, direction: .outgoing, peer: "all")
        case .command(let name, let argument):
            command(name, argument)
        }
    }

    private func command(_ name: String, _ argument: String) {
        switch name {
        case "to":
            let words = argument.split(separator: " ", maxSplits: 1)
            guard let first = words.first, let id = Int(first) else {
                return printer.complaint("/to: give a peer id and a message, as in /to 2 hello")
            }
            guard let peer = peers(id).first else { return printer.complaint("/to: there is no peer \(id); /peers lists them") }
            guard let (bytes, binary) = payload(words.count > 1 ? String(words[1]) : "") else { return }
            if send(bytes, binary: binary, to: peer) {
                printer.message(bytes, binary: binary, direction: .outgoing, peer: "\(id)")
            }
        case "binary":
            do {
                let bytes = try BinaryText.unhex(Array(argument.utf8))
                let reached = peers(nil).filter { send(bytes, binary: true, to: $0) }.count
                if reached == 0 { return printer.complaint("not sent: no peer is connected") }
                printer.message(bytes, binary: true, direction: .outgoing, peer: "all")
            } catch {
                printer.complaint("not sent: \(error) in '\(argument)'; write bytes as hex, such as 01ff")
            }
        case "close":
            let words = argument.split(separator: " ", maxSplits: 1)
            let id = words.first.flatMap { Int($0) }
            if let first = words.first, id == nil && first != "all" {
                return printer.complaint("/close: give a peer id or all, then a code and reason, as in /close 2 4000 bye")
            }
            guard let (code, reason) = SessionInput.closeArguments(words.count > 1 ? String(words[1]) : "") else {
                return printer.complaint("/close: the code must be 1000 or 3000-4999, as in /close 2 4000 bye")
            }
            let targets = peers(id)
            if targets.isEmpty { return printer.complaint(id.map { "/close: there is no peer \($0)" } ?? "/close: no peer is connected") }
            for peer in targets {
                do {
                    try peer.close(code: code, reason: reason)
                } catch {
                    return printer.complaint("/close: \(error)")
                }
            }
        case "peers":
            let list = peers(nil).map { p in
                "[\(p.id)] \(p.remoteAddress) \(p.request.path): received \(p.stats.messagesReceived), sent \(p.stats.messagesSent)"
            }
            printer.event("peers", list.isEmpty ? "no peers" : list.joined(separator: "\n"))
        default:
            printer.otherCommand(name, help: Self.help)
        }
    }

    static let help = """
        text                            send to every peer
        /to ID text                     send to one peer
        /binary HEX                     send a binary message to every peer
        /close [ID|all [code [reason]]] close peers (default all, 1000)
        /peers                          who is connected
        //text                          send '/text'
        Ctrl-D (at a terminal) or Ctrl-C closes every peer and exits.
        """

    /// The line as bytes to send: hex with --binary, a message encoded with --proto,
    /// --msgpack or --cbor.
    private func payload(_ text: String) -> ([UInt8], Bool)? {
        if let codec = printer.codec {
            switch codec.encode(text) {
            case .success(let bytes): return (bytes, true)
            case .failure(let error):
                printer.complaint("not sent: \(error)")
                return nil
            }
        }
        guard settings.hexInput else { return (Array(text.utf8), false) }
        do {
            return (try BinaryText.unhex(Array(text.utf8)), true)
        } catch {
            printer.complaint("not sent: \(error) in '\(text)'; write bytes as hex, such as 01ff")
            return nil
        }
    }

    /// Open peers: all of them, or the one with `id`.
    private func peers(_ id: Int?) -> [ServerPeer] {
        (server?.peers ?? []).filter { $0.isOpen && (id == nil || $0.id == id) }
    }

    private func send(_ bytes: [UInt8], binary: Bool, to peer: ServerPeer) -> Bool {
        do {
            try peer.send(ByteBuffer(bytes: bytes), kind: binary ? .binary : .text)
            return true
        } catch {
            printer.complaint("not sent to peer \(peer.id): \(error)")
            return false
        }
    }

    /// At a terminal Ctrl-D ends the session; the end of piped input leaves the server
    /// running, so `moonwire listen URL </dev/null &` serves until it is stopped.
    func inputEnded() {
        guard printer.console.interactive else { return }
        stop(exitCode: 0)
    }

    func interrupt(_ signal: Int32) {
        printer.event("interrupt", "closing every peer (Ctrl-C again to quit at once)")
        stop(exitCode: 128 + signal)
    }

    private func stop(exitCode: Int32) {
        if let script { return script.stop(exitCode) }
        guard let server, server.isListening else { return }
        server.close().whenComplete { _ in
            self.done?.succeed(exitCode)
            self.done = nil
        }
    }

    // MARK: Server events

    func server(_ server: MessageServer, didConnect peer: ServerPeer, request: ServerPeerRequest) {
        var text = "connected from \(request.remoteAddress)"
        if server.url.kind == .webSocket { text += " \(request.path)" }
        if let proto = request.subprotocol { text += " (subprotocol \(proto))" }
        printer.event("connect", text, direction: .incoming, peer: "\(peer.id)",
                      fields: [("address", LogLine.jsonString(request.remoteAddress))])
    }

    func session(_ peer: ServerPeer, didReceive message: ByteBuffer, kind: MessageKind) {
        let bytes = Array(message.readableBytesView)
        printer.message(bytes, binary: kind == .binary, direction: .incoming, peer: "\(peer.id)")
        if settings.echo, send(bytes, binary: kind == .binary, to: peer) {
            printer.message(bytes, binary: kind == .binary, direction: .outgoing, peer: "\(peer.id)")
        }
        if settings.relay {
            for other in peers(nil) where other.id != peer.id && send(bytes, binary: kind == .binary, to: other) {
                printer.message(bytes, binary: kind == .binary, direction: .outgoing, peer: "\(other.id)")
            }
        }
    }

    func session(_ peer: ServerPeer, didClose info: CloseInfo) {
        let by = info.initiator == .network ? "lost" : "closed by \(info.initiator == .local ? "us" : "the peer")"
        printer.event(
            "close", "\(by): " + MessageText.describeClose(code: info.code, reason: info.reason),
            direction: info.initiator == .peer ? .incoming : .outgoing, peer: "\(peer.id)",
            fields: [("code", "\(info.code)"), ("reason", LogLine.jsonString(info.reason))]
        )
    }

    func session(_ peer: ServerPeer, didFail error: ConnectionError) {
        printer.event("error", "\(error)", peer: "\(peer.id)", isError: true)
    }

    func server(_ server: MessageServer, didFail error: ConnectionError) {
        printer.event("error", "\(error)", peer: nil, isError: true)
    }

    func server(_ server: MessageServer, accepting event: AcceptPause) {
        if case .paused = event {
            printer.event("error", "\(event)", isError: true)
        } else {
            printer.event("accept", "\(event)")
        }
    }
}
