import Foundation
import MoonwireCore
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The `connect` command's connection: input lines to messages and commands, messages
/// and events to the console. Lives on its event loop; every method runs there.
final class ConnectSession: ManagedConnectionDelegate, @unchecked Sendable {
    struct Settings {
        var execute: [String]
        var wait: Double?
        var hexInput: Bool
        var maxFile: Int
    }

    /// Lines typed or piped before the connection first opens wait, up to this many; so do
    /// messages while it reconnects (in its send queue).
    static let queueLimit = 10_000
    /// Without --wait, the end of input closes once the peer has been quiet this long.
    static let quietBeforeClose = TimeAmount.seconds(1)

    private let url: TransportURL
    private let settings: Settings
    private let printer: SessionPrinter
    private let connection: ManagedConnection
    private var done: EventLoopPromise<Int32>?
    private var opened = false
    private var everOpened = false
    private var inputDone = false
    private var userClosed = false
    private var interrupted: Int32?
    private var lastInbound = NIODeadline.now()
    private var pings: [String: NIODeadline] = [:]
    /// What may have been the peer's own ping: its last message, if short and not
    /// answered since (nothing sent after it).
    private var probe = UnansweredProbe()
    /// Input before the first open: commands such as /close make sense only once it is open.
    private var held: [String] = []
    private let started = NIODeadline.now()

    /// Must be called on `eventLoop`.
    init(
        url: TransportURL, configuration: ManagedConnection.Configuration, settings: Settings, printer: SessionPrinter,
        recorder: ConnectionRecorder? = nil, eventLoop: EventLoop
    ) {
        self.url = url
        self.settings = settings
        self.printer = printer
        connection = ManagedConnection(url: url, configuration: configuration, eventLoop: eventLoop)
        connection.recorder = recorder
        connection.delegate = self
    }

    private var eventLoop: EventLoop { connection.eventLoop }

    /// Connects and reads input; the future gives the exit code.
    func start() -> EventLoopFuture<Int32> {
        let promise = eventLoop.makePromise(of: Int32.self)
        done = promise
        printer.event("connecting", "connecting to \(url)")
        connection.start()
        printer.console.start(on: eventLoop, onLine: handle, onEnd: inputEnded)
        return promise.futureResult
    }

    // MARK: Input

    func handle(_ line: String) {
        guard everOpened else {
            guard held.count < Self.queueLimit else {
                return printer.complaint("not sent: \(Self.queueLimit) lines already wait for the connection to open")
            }
            return held.append(line)
        }
        switch SessionInput(line) {
        case .message(let text):
            if let codec = printer.codec {
                switch codec.encode(text) {
                case .success(let bytes): send(bytes, binary: true)
                case .failure(let error): printer.complaint("not sent: \(error)")
                }
            } else if settings.hexInput {
                sendHex(text)
            } else {
                send(Array(text.utf8), binary: false)
            }
        case .command(let name, let argument):
            command(name, argument)
        }
    }

    private func command(_ name: String, _ argument: String) {
        switch name {
        case "ping":
            guard url.isWebSocket else { return printer.complaint("/ping: TCP has no ping") }
            guard (try? WebSocketPing(ByteBuffer(string: argument))) != nil else {
                return printer.complaint("/ping: a ping payload is at most \(WebSocketPing.maxPayload) bytes")
            }
            guard connection.ping(ByteBuffer(string: argument)) else { return printer.complaint("/ping: the connection is not open") }
            pings[argument] = .now()
            printer.event("ping", argument.isEmpty ? "ping" : "ping \(argument)", direction: .outgoing)
        case "close":
            guard let (code, reason) = SessionInput.closeArguments(argument),
                code == CloseCode.normal || CloseCode.applicationRange.contains(code)
            else {
                let range = CloseCode.applicationRange
                return printer.complaint("/close: the code must be \(CloseCode.normal) or \(range.lowerBound)-\(range.upperBound), as in /close 4000 done")
            }
            guard (try? WebSocketClose(code: Int(code), reason: reason)) != nil else {
                return printer.complaint("/close: the reason is at most \(WebSocketClose.maxReason) bytes")
            }
            userClosed = true
            connection.close(code: code, reason: reason)
        case "binary":
            sendHex(argument)
        case "file":
            sendFile(argument)
        case "stats":
            printer.event("stats", statsLine())
        default:
            printer.otherCommand(name, help: Self.help)
        }
    }

    static let help = """
        /ping [payload]          send a ping; its pong is shown
        /close [code [reason]]   close (default 1000) and exit
        /binary HEX              send a binary message, such as /binary 01ff
        /file PATH               send a file's bytes as one binary message
        /stats                   messages, bytes, round-trip time, reconnects
        /help                    this list
        //text                   send '/text'
        Ctrl-D closes with 1000; Ctrl-C closes and exits 130, twice exits at once.
        """

    private func sendHex(_ text: String) {
        do {
            send(try BinaryText.unhex(Array(text.utf8)), binary: true)
        } catch {
            printer.complaint("not sent: \(error) in '\(text)'; write bytes as hex, such as 01ff")
        }
    }

    private func sendFile(_ path: String) {
        guard !path.isEmpty else { return printer.complaint("/file: give a path, as in /file payload.bin") }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            return printer.complaint("/file: cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: settings.maxFile + 1) ?? Data() else {
            return printer.complaint("/file: cannot read '\(path)'")
        }
        guard data.count <= settings.maxFile else {
            return printer.complaint("/file: '\(path)' is larger than --max-message (\(settings.maxFile) bytes)")
        }
        send(Array(data), binary: true)
    }

    private func send(_ bytes: [UInt8], binary: Bool) {
        switch connection.send(ByteBuffer(bytes: bytes), kind: binary ? .binary : .text) {
        case .sent, .queued:
            probe.weSent()
            printer.message(bytes, binary: binary, direction: .outgoing)
        case .queueFull:
            let s = connection.stats
            printer.complaint("not sent: the send queue is full (\(s.queued) messages, \(s.buffered) bytes wait for the peer)")
        case .tooLarge:
            printer.complaint("not sent: the message is larger than the send budget (\(connection.queueBytes) bytes)")
        case .closed:
            printer.complaint("not sent: the connection is closed")
        }
    }

    private func statsLine() -> String {
        let s = connection.stats
        var parts = [
            "sent \(s.sent) messages (\(s.bytesSent) bytes)",
            "received \(s.received) (\(s.bytesReceived) bytes)",
        ]
        if let rtt = s.lastRTT { parts.append(String(format: "rtt %.3f ms", rtt * 1000)) }
        if let reconnects = s.reconnects, reconnects > 0 { parts.append("reconnects \(reconnects)") }
        if s.queued > 0 || s.dropped > 0 { parts.append("queued \(s.queued), dropped \(s.dropped)") }
        parts.append(String(format: "up %.1f s", Double((NIODeadline.now() - started).nanoseconds) / 1e9))
        return parts.joined(separator: ", ")
    }

    /// End of input closes the connection, but only once what was typed before it opened
    /// has gone out.
    func inputEnded() {
        inputDone = true
        if opened { closeAfterInput() }
    }

    private func closeAfterInput() {
        if let wait = settings.wait {
            eventLoop.scheduleTask(in: .nanoseconds(Int64(min(wait, 1e9) * 1e9))) { self.closeNormally() }
        } else if printer.console.interactive {
            closeNormally()
        } else {
            closeWhenQuiet()
        }
    }

    private func closeWhenQuiet() {
        let quietUntil = lastInbound + Self.quietBeforeClose
        if NIODeadline.now() >= quietUntil {
            closeNormally()
        } else {
            eventLoop.scheduleTask(deadline: quietUntil) { self.closeWhenQuiet() }
        }
    }

    private func closeNormally() {
        guard connection.isAlive else { return }
        connection.close(code: CloseCode.normal, reason: "")
    }

    /// SIGINT or SIGTERM: close normally, then exit 130 or 143.
    func interrupt(_ signal: Int32) {
        guard interrupted == nil else { return }
        interrupted = 128 + signal
        printer.event("interrupt", "closing (Ctrl-C again to quit at once)")
        if connection.isAlive {
            connection.close(code: CloseCode.normal, reason: "")
        } else {
            finish(128 + signal)
        }
    }

    private func finish(_ code: Int32) {
        done?.succeed(code)
        done = nil
    }

    // MARK: Connection events

    func managedConnectionDidOpen(_ connection: ManagedConnection, info: ManagedConnection.OpenInfo) {
        opened = true
        lastInbound = .now()
        let proto = info.subprotocol.map { " (subprotocol \($0))" } ?? ""
        printer.event("open", (info.reconnects > 0 ? "reconnected to \(url)" : "connected to \(url)") + proto,
                      fields: [("reconnects", "\(info.reconnects)")])
        if !everOpened {
            everOpened = true
            let waiting = settings.execute + held
            held = []
            waiting.forEach(handle)
        }
        if inputDone {
            // The queue is flushed right after this returns; the close comes after it.
            eventLoop.execute { self.closeAfterInput() }
        }
    }

    func managedConnection(_ connection: ManagedConnection, didReceive message: ByteBuffer, kind: MessageKind) {
        lastInbound = .now()
        probe.received(message, kind: kind, at: lastInbound)
        printer.message(Array(message.readableBytesView), binary: kind == .binary, direction: .incoming)
    }

    func managedConnection(_ connection: ManagedConnection, didReceivePong payload: ByteBuffer) {
        let text = String(decoding: payload.readableBytesView, as: UTF8.self)
        // Pongs of the heartbeat's own pings are not the user's business.
        guard let sent = pings.removeValue(forKey: text) else { return }
        let ms = Double((NIODeadline.now() - sent).nanoseconds) / 1e6
        printer.event("pong", String(format: "pong%@ after %.2f ms", text.isEmpty ? "" : " " + text, ms), direction: .incoming)
    }

    func managedConnection(_ connection: ManagedConnection, didFail error: ConnectionError) {
        let text = everOpened ? "\(error)" : "cannot connect to \(url): \(error)"
        printer.event("error", text, isError: true)
    }

    func managedConnection(_ connection: ManagedConnection, willReconnect attempt: Int, delay: TimeAmount) -> ManagedConnection.RetryDecision {
        let seconds = Double(delay.nanoseconds) / 1e9
        printer.event("reconnect", String(format: "reconnecting in %.1f s (attempt %d)", seconds, attempt), fields: [("attempt", "\(attempt)")])
        return ManagedConnection.RetryDecision()
    }

    func managedConnection(_ connection: ManagedConnection, didClose report: ConnectionLifecycle.CloseReport) {
        opened = false
        pings.removeAll()
        if everOpened || report.code != CloseCode.abnormal {
            let by = report.by == .network ? "connection lost" : "closed by \(report.by == .local ? "us" : "the peer")"
            printer.event(
                "close", "\(by): " + MessageText.describeClose(code: report.code, reason: report.reason),
                direction: report.by == .peer ? .incoming : report.by == .local ? .outgoing : .local,
                isError: !(report.code == 1000 || report.code == 1001),
                fields: [("code", "\(report.code)"), ("reason", LogLine.jsonString(report.reason))]
            )
        }
        if report.by == .peer, let hint = probe.hint(closedAt: .now()) {
            printer.event("note", hint, isError: true)
        }
        probe = UnansweredProbe()
        guard !report.willReconnect else { return }
        if let interrupted { return finish(interrupted) }
        guard everOpened else { return finish(1) }
        let normal = report.code == CloseCode.normal || report.code == CloseCode.goingAway
        finish(normal || (userClosed && report.by == .local && report.clean) ? 0 : 1)
    }
}

/// A peer that closes soon after a short message we never answered has most likely
/// given up on its own application-level ping (Socket.IO's `2`, graphql-ws's
/// `{"type":"ping"}`): `connect` says so and shows the `--auto-reply` that answers it.
struct UnansweredProbe {
    /// Probes whose answer everybody knows.
    static let known: [String: String] = [
        "2": "3", "ping": "pong", "PING": "PONG", #"{"type":"ping"}"#: #"{"type":"pong"}"#,
    ]
    /// Longer messages are data, not pings.
    static let longest = 32

    private var last: String?
    private var at = NIODeadline.now()
    private var repeats = 0

    mutating func received(_ message: ByteBuffer, kind: MessageKind, at now: NIODeadline) {
        guard kind == .text, message.readableBytes <= Self.longest else {
            last = nil
            return
        }
        let text = String(decoding: message.readableBytesView, as: UTF8.self)
        repeats = text == last ? repeats + 1 : 1
        last = text
        at = now
    }

    mutating func weSent() {
        last = nil
    }

    /// What to tell the user when the peer closed at `now`, or nil when the last thing
    /// heard does not look like a ping left unanswered.
    func hint(closedAt now: NIODeadline) -> String? {
        guard let last, Self.known[last] != nil || repeats >= 2 else { return nil }
        let seconds = Double((now - at).nanoseconds) / 1e9
        let reply = Self.known[last] ?? "REPLY"
        return String(
            format: "the peer closed %.1f s after its last message %@, which was not answered: if that is its ping, answer it with --auto-reply '%@=%@'",
            seconds, last.debugDescription, last, reply
        )
    }
}
