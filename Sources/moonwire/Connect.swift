import ArgumentParser
import Foundation
import MoonwireCore
import MoonwireLua
import NIOCore
import NIOPosix

struct Connect: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Interactive client: stdin lines go out as messages, messages print to stdout.",
        discussion: """
            Lines typed (or piped) before the connection opens are queued and sent once it \
            does. At the end of input moonwire waits until the peer has been quiet for \
            --linger seconds (so replies to piped lines still print), then closes normally. When the peer closes, moonwire \
            exits with its close code: 0 for 1000 (normal), else the code modulo 256, and \
            prints the code and reason on stderr. A connection that cannot be made exits 1.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(name: [.short, .customLong("header")], help: "An extra handshake header, as 'Name: value' (repeatable).")
    var headers: [String] = []

    @Option(name: [.short, .customLong("protocol")], help: "A subprotocol to offer (repeatable).")
    var protocols: [String] = []

    @Flag(help: "Print binary messages as hex instead of raw bytes.")
    var binary = false

    @Flag(help: "Offer permessage-deflate compression.")
    var compress = false

    @Flag(help: "Do not verify the server's certificate (testing only).")
    var insecure = false

    @Option(help: "Trust the CA certificates in this PEM file.")
    var ca: String?

    @Option(help: "After the end of input, close once the peer has been quiet this many seconds.")
    var linger: Double = 1

    @Argument(help: "A ws:// or wss:// URL.")
    var url: String

    func run() throws {
        let target: WebSocketURL
        do {
            target = try WebSocketURL(url)
        } catch {
            throw ValidationError("\(error); give a ws:// or wss:// URL")
        }
        var options = WebSocketClientOptions()
        options.protocols = protocols
        options.compress = compress
        options.tls.insecure = insecure
        options.tls.caFile = ca
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else {
                throw ValidationError("--header '\(header)' has no colon; write it as 'Name: value'")
            }
            options.headers.append((
                String(header[..<colon]).trimmingCharacters(in: .whitespaces),
                String(header[header.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            ))
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        guard linger >= 0, linger.isFinite else { throw ValidationError("--linger must be a number of seconds, 0 or more") }
        let session = ConnectSession(hexBinary: binary, linger: .nanoseconds(Int64(linger * 1e9)), logger: global)
        let code = try loop.flatSubmit {
            session.start(target, options: options, on: loop)
        }.wait()
        ProcessEnd.exit(code, parking: [loop])
    }
}

/// The `connect` command's connection: stdin to messages, messages to stdout.
private final class ConnectSession: ManagedConnectionDelegate, @unchecked Sendable {
    private let hexBinary: Bool
    private let global: GlobalOptions
    private var connection: ManagedConnection?
    private var done: EventLoopPromise<Int32>?
    private var opened = false
    private var inputDone = false
    private let linger: TimeAmount
    private var lastInbound = NIODeadline.now()

    init(hexBinary: Bool, linger: TimeAmount, logger: GlobalOptions) {
        self.hexBinary = hexBinary
        self.linger = linger
        self.global = logger
    }

    func start(_ url: WebSocketURL, options: WebSocketClientOptions, on loop: EventLoop) -> EventLoopFuture<Int32> {
        let promise = loop.makePromise(of: Int32.self)
        done = promise
        var configuration = ManagedConnection.Configuration()
        configuration.socket = options
        configuration.queueLimit = .max
        configuration.reconnect = nil
        let c = ManagedConnection(url: .webSocket(url), configuration: configuration, eventLoop: loop)
        c.delegate = self
        connection = c
        c.start()
        Thread.detachNewThread { [self] in
            while let line = readLine(strippingNewline: true) {
                loop.execute { _ = self.connection?.send(ByteBuffer(string: line), kind: .text) }
            }
            loop.execute { self.inputEnded() }
        }
        return promise.futureResult
    }

    /// End of input closes the connection, but only once what was typed before the
    /// connection opened has gone out.
    private func inputEnded() {
        inputDone = true
        if opened { closeWhenQuiet() }
    }

    private func closeWhenQuiet() {
        guard let connection, connection.isAlive else { return }
        let quietUntil = lastInbound + linger
        if NIODeadline.now() >= quietUntil {
            connection.close(code: WebSocketCloseCode.normal, reason: "")
        } else {
            connection.eventLoop.scheduleTask(deadline: quietUntil) { self.closeWhenQuiet() }
        }
    }

    func managedConnectionDidOpen(_ connection: ManagedConnection, info: ManagedConnection.OpenInfo) {
        opened = true
        lastInbound = .now()
        if inputDone {
            // The queue is flushed right after this returns; the quiet period starts then.
            connection.eventLoop.execute { self.closeWhenQuiet() }
        }
        let proto = info.subprotocol.map { " (protocol \($0))" } ?? ""
        global.makeLogger().info("connected\(proto)")
    }

    func managedConnection(_ connection: ManagedConnection, didReceive message: ByteBuffer, kind: WebSocketMessageKind) {
        lastInbound = .now()
        var bytes = message
        if kind == .binary && hexBinary {
            print(BinaryText.hex(bytes.readableBytesView))
        } else {
            let data = bytes.readBytes(length: bytes.readableBytes) ?? []
            FileHandle.standardOutput.write(Data(data + [0x0a]))
        }
    }

    func managedConnection(_ connection: ManagedConnection, didFail error: WebSocketConnectionError) {
        ScriptRuntime.writeToStderr("moonwire: \(error)")
    }

    func managedConnection(_ connection: ManagedConnection, didClose report: ConnectionLifecycle.CloseReport) {
        guard opened else { return done?.succeed(1) ?? () }
        if report.by != .local || report.code != WebSocketCloseCode.normal {
            let reason = report.reason.isEmpty ? "" : " \(report.reason)"
            ScriptRuntime.writeToStderr("moonwire: closed by \(report.by.rawValue): \(report.code)\(reason)")
        }
        done?.succeed(report.code == WebSocketCloseCode.normal ? 0 : Int32(report.code % 256))
    }
}
