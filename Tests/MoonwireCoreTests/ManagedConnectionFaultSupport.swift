#if canImport(Glibc)
import Glibc
#endif
import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import MoonwireCore

// Support for ManagedConnectionFaultTests: a managed client and a server that record
// what happens, with timestamps, on their loops, and let a test await a condition over
// what was recorded. Waiting is event-driven: every recorded event re-checks the waiters,
// and each wait fails after its own timeout with what was recorded so far.

struct FaultTimeout: Error, CustomStringConvertible {
    var description: String
}

/// Events of one kind, appended on `loop`, with waiters re-checked on each append.
final class EventLog<Event>: @unchecked Sendable {
    let loop: EventLoop
    /// Touched on `loop` only.
    private(set) var events: [Event] = []
    private var waiters: [Int: (condition: ([Event]) -> Bool, promise: EventLoopPromise<Void>, timer: Scheduled<Void>)] = [:]
    private var nextWaiter = 0

    init(loop: EventLoop) {
        self.loop = loop
    }

    func append(_ event: Event) {
        self.loop.preconditionInEventLoop()
        self.events.append(event)
        for (id, waiter) in self.waiters where waiter.condition(self.events) {
            self.waiters[id] = nil
            waiter.timer.cancel()
            waiter.promise.succeed(())
        }
    }

    /// Waits until `condition` holds over the events, or throws after `timeout`.
    func wait(_ what: String, timeout: TimeAmount = .seconds(5), until condition: @escaping ([Event]) -> Bool) async throws {
        try await self.loop.flatSubmit { () -> EventLoopFuture<Void> in
            if condition(self.events) { return self.loop.makeSucceededVoidFuture() }
            let promise = self.loop.makePromise(of: Void.self)
            let id = self.nextWaiter
            self.nextWaiter += 1
            let timer = self.loop.scheduleTask(in: timeout) {
                guard let waiter = self.waiters.removeValue(forKey: id) else { return }
                let seen = self.events.map { "\($0)" }.joined(separator: "\n  ")
                waiter.promise.fail(FaultTimeout(description: "timed out after \(Double(timeout.nanoseconds) / 1e9) s waiting for \(what); events:\n  \(seen)"))
            }
            self.waiters[id] = (condition, promise, timer)
            return promise.futureResult
        }.get()
    }

    /// A copy of the events, taken on the loop.
    func snapshot() async throws -> [Event] {
        try await self.loop.submit { self.events }.get()
    }
}

/// Seconds between two deadlines.
func seconds(_ from: NIODeadline, _ to: NIODeadline) -> Double {
    Double((to - from).nanoseconds) / 1e9
}

func seconds(_ amount: TimeAmount) -> Double {
    Double(amount.nanoseconds) / 1e9
}

// MARK: - Client

enum FaultEvent: CustomStringConvertible {
    case open(reconnects: Int, at: NIODeadline)
    case message(String, at: NIODeadline)
    case fail(ConnectionError, at: NIODeadline)
    case close(ConnectionLifecycle.CloseReport, at: NIODeadline)
    case willReconnect(attempt: Int, delay: TimeAmount, at: NIODeadline)

    var at: NIODeadline {
        switch self {
        case .open(_, let at), .message(_, let at), .fail(_, let at), .close(_, let at), .willReconnect(_, _, let at): return at
        }
    }

    var description: String {
        let t = String(format: "%.3f", Double(self.at.uptimeNanoseconds % 1_000_000_000_000) / 1e9)
        switch self {
        case .open(let reconnects, _): return "\(t) open(reconnects: \(reconnects))"
        case .message(let text, _): return "\(t) message(\(text))"
        case .fail(let error, _): return "\(t) fail(\(error), status \(error.httpStatus.map(String.init) ?? "-"))"
        case .close(let report, _): return "\(t) close(\(report))"
        case .willReconnect(let attempt, let delay, _): return "\(t) willReconnect(attempt: \(attempt), delay: \(seconds(delay)))"
        }
    }

    /// The event's name, for comparing sequences: open, message, fail, close, retry.
    var kind: String {
        switch self {
        case .open: return "open"
        case .message: return "message"
        case .fail: return "fail"
        case .close: return "close"
        case .willReconnect: return "retry"
        }
    }

    var openReconnects: Int? { if case .open(let r, _) = self { return r } else { return nil } }
    var closeReport: ConnectionLifecycle.CloseReport? { if case .close(let r, _) = self { return r } else { return nil } }
    var failure: ConnectionError? { if case .fail(let e, _) = self { return e } else { return nil } }
    var retry: (attempt: Int, delay: TimeAmount)? {
        if case .willReconnect(let a, let d, _) = self { return (a, d) } else { return nil }
    }
    var isFinalClose: Bool { self.closeReport.map { !$0.willReconnect } ?? false }
}

/// A `ManagedConnection` on its own loop whose delegate records everything.
final class FaultClient: ManagedConnectionDelegate, @unchecked Sendable {
    let loop: EventLoop
    let log: EventLog<FaultEvent>
    /// Set on the loop, before `start`.
    private(set) var connection: ManagedConnection!
    /// Run (on the loop) after the open is recorded: `on_open`.
    var onOpen: (ManagedConnection, ManagedConnection.OpenInfo) -> Void = { _, _ in }
    /// The `on_reconnect` hook's answer.
    var onReconnect: (Int, TimeAmount) -> ManagedConnection.RetryDecision = { _, _ in ManagedConnection.RetryDecision() }
    /// The heartbeat's message, when the heartbeat probes with one.
    var heartbeatMessage: ByteBuffer?

    private init(loop: EventLoop) {
        self.loop = loop
        self.log = EventLog(loop: loop)
    }

    /// A configuration with the given policies and short socket timeouts.
    static func configuration(
        reconnect: ReconnectPolicy?,
        heartbeat: HeartbeatMonitor.Configuration? = nil,
        closeTimeout: TimeAmount = .milliseconds(500)
    ) -> ManagedConnection.Configuration {
        var configuration = ManagedConnection.Configuration()
        configuration.reconnect = reconnect
        configuration.heartbeat = heartbeat
        configuration.socket.connectTimeout = .seconds(2)
        configuration.socket.closeTimeout = closeTimeout
        return configuration
    }

    /// Creates the connection, lets `setup` install hooks, then starts it.
    static func start(
        _ url: String,
        configuration: ManagedConnection.Configuration,
        setup: @escaping @Sendable (FaultClient) -> Void = { _ in }
    ) async throws -> FaultClient {
        let loop = TestClient.group.next()
        let client = FaultClient(loop: loop)
        let parsed = try TransportURL(url)
        try await loop.submit {
            client.connection = ManagedConnection(url: parsed, configuration: configuration, eventLoop: loop)
            client.connection.delegate = client
            setup(client)
            client.connection.start()
        }.get()
        return client
    }

    func onLoop<T>(_ body: @escaping () throws -> T) async throws -> T {
        try await self.loop.submit(body).get()
    }

    func wait(_ what: String, timeout: TimeAmount = .seconds(5), until condition: @escaping ([FaultEvent]) -> Bool) async throws {
        try await self.log.wait(what, timeout: timeout, until: condition)
    }

    /// Closes the connection deliberately if it is still alive and waits for its final report.
    func finish() async throws {
        let alive = try await self.onLoop { () -> Bool in
            guard self.connection.isAlive else { return false }
            self.connection.close(code: 1000, reason: "test over")
            return true
        }
        if alive {
            try await self.wait("the final close after close()") { $0.contains(where: \.isFinalClose) }
        }
    }

    // MARK: ManagedConnectionDelegate

    func managedConnectionDidOpen(_ connection: ManagedConnection, info: ManagedConnection.OpenInfo) {
        self.log.append(.open(reconnects: info.reconnects, at: .now()))
        self.onOpen(connection, info)
    }

    func managedConnection(_ connection: ManagedConnection, didReceive message: ByteBuffer, kind: MessageKind) {
        self.log.append(.message(String(buffer: message), at: .now()))
    }

    func managedConnection(_ connection: ManagedConnection, didFail error: ConnectionError) {
        self.log.append(.fail(error, at: .now()))
    }

    func managedConnection(_ connection: ManagedConnection, didClose report: ConnectionLifecycle.CloseReport) {
        self.log.append(.close(report, at: .now()))
    }

    func managedConnection(_ connection: ManagedConnection, willReconnect attempt: Int, delay: TimeAmount) -> ManagedConnection.RetryDecision {
        self.log.append(.willReconnect(attempt: attempt, delay: delay, at: .now()))
        return self.onReconnect(attempt, delay)
    }

    func managedConnectionHeartbeatMessage(_ connection: ManagedConnection) -> (ByteBuffer, MessageKind)? {
        self.heartbeatMessage.map { ($0, .text) }
    }
}

// MARK: - Server

enum FaultServerEvent: CustomStringConvertible {
    case connect(peer: Int, request: ServerPeerRequest, at: NIODeadline)
    case message(peer: Int, text: String, at: NIODeadline)
    case close(peer: Int, info: CloseInfo, at: NIODeadline)
    /// Recorded by tests when they inject a fault.
    case fault(peer: Int, what: String, at: NIODeadline)

    var at: NIODeadline {
        switch self {
        case .connect(_, _, let at), .message(_, _, let at), .close(_, _, let at), .fault(_, _, let at): return at
        }
    }

    var description: String {
        let t = String(format: "%.3f", Double(self.at.uptimeNanoseconds % 1_000_000_000_000) / 1e9)
        switch self {
        case .connect(let peer, let request, _): return "\(t) connect(peer \(peer), \(request.path))"
        case .message(let peer, let text, _): return "\(t) message(peer \(peer), \(text))"
        case .close(let peer, let info, _): return "\(t) close(peer \(peer), \(info))"
        case .fault(let peer, let what, _): return "\(t) fault(peer \(peer), \(what))"
        }
    }

    var connectedPeer: Int? { if case .connect(let p, _, _) = self { return p } else { return nil } }
    var received: (peer: Int, text: String)? { if case .message(let p, let t, _) = self { return (p, t) } else { return nil } }
}

/// A `MessageServer` whose delegate records everything, with hooks run on its loop.
final class FaultServer: MessageServerDelegate, @unchecked Sendable {
    let loop: EventLoop
    let log: EventLog<FaultServerEvent>
    private(set) var server: MessageServer!
    var onConnect: (ServerPeer) -> Void = { _ in }
    var onMessage: (ServerPeer, String) -> Void = { _, _ in }

    private init(loop: EventLoop) {
        self.loop = loop
        self.log = EventLog(loop: loop)
    }

    /// Listens on 127.0.0.1:`port` (0: any free port); `setup` installs hooks first.
    static func start(
        port: Int = 0,
        scheme: String = "ws",
        setup: @escaping @Sendable (FaultServer) -> Void = { _ in }
    ) async throws -> FaultServer {
        let loop = TestClient.group.next()
        let test = FaultServer(loop: loop)
        try await loop.submit {
            test.server = try MessageServer(
                url: ServerURL("\(scheme)://127.0.0.1:\(port)" + (scheme.hasPrefix("ws") ? "/" : "")),
                options: MessageServerOptions(closeTimeout: .milliseconds(300)),
                eventLoop: loop
            )
            test.server.delegate = test
            setup(test)
        }.get()
        return test
    }

    var port: Int { self.server.url.port }
    var url: String {
        let scheme = self.server.url.scheme
        return "\(scheme)://127.0.0.1:\(self.port)" + (scheme.hasPrefix("ws") ? "/" : "")
    }

    func onLoop<T>(_ body: @escaping () throws -> T) async throws -> T {
        try await self.loop.submit(body).get()
    }

    func wait(_ what: String, timeout: TimeAmount = .seconds(5), until condition: @escaping ([FaultServerEvent]) -> Bool) async throws {
        try await self.log.wait(what, timeout: timeout, until: condition)
    }

    /// Aborts every peer still there (paused ones would otherwise linger), closes the
    /// server and waits until it is gone.
    func stop() async throws {
        try await self.onLoop { () -> EventLoopFuture<Void> in
            for peer in self.server.peers where peer.isPaused { peer.abort() }
            return self.server.close()
        }.get()
    }

    /// Records a fault a test injects, so it shows in the log with its time.
    func fault(_ peer: ServerPeer, _ what: String) {
        self.log.append(.fault(peer: peer.id, what: what, at: .now()))
    }

    func server(_ server: MessageServer, didConnect peer: ServerPeer, request: ServerPeerRequest) {
        self.log.append(.connect(peer: peer.id, request: request, at: .now()))
        self.onConnect(peer)
    }

    func session(_ peer: ServerPeer, didReceive message: ByteBuffer, kind: MessageKind) {
        let text = String(buffer: message)
        self.log.append(.message(peer: peer.id, text: text, at: .now()))
        self.onMessage(peer, text)
    }

    func session(_ peer: ServerPeer, didFail error: ConnectionError) {}

    func session(_ peer: ServerPeer, didClose info: CloseInfo) {
        self.log.append(.close(peer: peer.id, info: info, at: .now()))
    }

    func server(_ server: MessageServer, accepting event: AcceptPause) {
        self.log.append(.fault(peer: 0, what: "\(event)", at: .now()))
    }
}

/// A port on 127.0.0.1 that nothing listens on: bound, then closed.
func closedPort() throws -> Int {
    let socket = try ListeningSocket.open(host: "127.0.0.1", port: 0)
    close(socket.handle)
    return socket.port
}
