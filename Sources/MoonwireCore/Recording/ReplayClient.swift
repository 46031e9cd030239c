import NIOCore

/// Plays the client's side of a recorded conversation against a server
/// (`moonwire replay FILE --client [URL]`): after the open, waits for the
/// recorded greeting; then for each exchange sends the recorded message (after
/// its recorded gap divided by `speed`) and waits for each recorded reply in
/// order, checked with the matcher. Done when every reply came, or at the first
/// difference, a close, or a reply that did not come within `timeout`.
public final class ReplayClient: ManagedConnectionDelegate {
    public let conversation: RecordedConversation
    public let matcher: MessageMatcher
    public let speed: Double
    public let timeout: TimeAmount
    public let connection: ManagedConnection
    /// Lines worth telling the user, one per exchange.
    public var report: (String) -> Void = { _ in }
    private let done: EventLoopPromise<String?>
    private var exchange = 0
    private var reply = 0
    private var timer: Scheduled<Void>?
    private var finished = false
    private var outcome: String?
    private var resolved = false

    /// `result` succeeds with nil when every reply came, else with what went wrong.
    public init(conversation: RecordedConversation, url: TransportURL, matcher: MessageMatcher, speed: Double, timeout: TimeAmount, configuration: ManagedConnection.Configuration, eventLoop: EventLoop) {
        self.conversation = conversation
        self.matcher = matcher
        self.speed = speed
        self.timeout = timeout
        var configuration = configuration
        configuration.reconnect = nil
        if let p = conversation.subprotocol, configuration.socket.protocols.isEmpty { configuration.socket.protocols = [p] }
        connection = ManagedConnection(url: url, configuration: configuration, eventLoop: eventLoop)
        done = eventLoop.makePromise()
        connection.delegate = self
    }

    public var result: EventLoopFuture<String?> { done.futureResult }

    public func start() { connection.start() }

    public func managedConnectionDidOpen(_ connection: ManagedConnection, info: ManagedConnection.OpenInfo) {
        if let first = conversation.exchanges.first, first.sent == nil {
            awaitReplies(since: conversation.openTime)
        } else {
            sendNext(after: conversation.openTime)
        }
    }

    public func managedConnection(_ connection: ManagedConnection, didReceive message: ByteBuffer, kind: MessageKind) {
        guard !finished else { return }
        let current = conversation.exchanges[exchange]
        guard reply < current.replies.count else {
            finish("exchange \(current.number): the server sent a message the recording does not have: \(matcher.shown(Array(message.readableBytesView), kind: kind))")
            return
        }
        if let diff = matcher.difference(expected: current.replies[reply], actual: Array(message.readableBytesView), kind: kind) {
            finish("exchange \(current.number), reply \(reply + 1): differs from the recording\n" + diff)
            return
        }
        reply += 1
        if reply == current.replies.count { exchangeDone() } else { armTimer() }
    }

    public func managedConnection(_ connection: ManagedConnection, didFail error: ConnectionError) {
        finish("connection failed: \(error)")
    }

    public func managedConnection(_ connection: ManagedConnection, didClose report: ConnectionLifecycle.CloseReport) {
        guard !finished else { return resolve() }
        if exchange >= conversation.exchanges.count {
            finish(nil)
        } else {
            finish("the connection closed (\(report.code)\(report.reason.isEmpty ? "" : " \(report.reason)")) during exchange \(conversation.exchanges[exchange].number)")
        }
    }

    private func awaitReplies(since: Double) {
        reply = 0
        if conversation.exchanges[exchange].replies.isEmpty { exchangeDone() } else { armTimer() }
    }

    private func exchangeDone() {
        timer?.cancel()
        let current = conversation.exchanges[exchange]
        report("exchange \(current.number): ok (\(current.replies.count) \(current.replies.count == 1 ? "reply" : "replies"))")
        exchange += 1
        sendNext(after: current.replies.last?.time ?? current.sent?.time ?? conversation.openTime)
    }

    private func sendNext(after last: Double) {
        guard exchange < conversation.exchanges.count, let message = conversation.exchanges[exchange].sent else {
            finish(nil)
            return
        }
        let gap: TimeAmount = speed > 0 ? .nanoseconds(Int64(max(0, message.time - last) / speed * 1e9)) : .zero
        let send = { [weak self] in
            guard let self, !self.finished else { return }
            _ = self.connection.send(ByteBuffer(bytes: message.data), kind: message.kind)
            self.awaitReplies(since: message.time)
        }
        if gap == .zero { send() } else { timer = connection.eventLoop.scheduleTask(in: gap, send) }
    }

    private func armTimer() {
        timer?.cancel()
        let current = conversation.exchanges[exchange]
        let n = reply + 1
        let expected = current.replies[n - 1]
        timer = connection.eventLoop.scheduleTask(in: timeout) { [weak self] in
            guard let self else { return }
            self.finish("exchange \(current.number), reply \(n): did not come within \(Double(self.timeout.nanoseconds) / 1e9) s\n expected \(self.matcher.shown(expected.data, kind: expected.kind))")
        }
    }

    private func finish(_ failure: String?) {
        guard !finished else { return }
        finished = true
        outcome = failure
        timer?.cancel()
        // The result comes once the close handshake is done, so the server sees a clean close.
        if connection.state == "closed" { return resolve() }
        connection.close(code: failure == nil ? 1000 : ReplayServer.mismatchCode, reason: failure.map(ReplayServer.closeReason) ?? "")
    }

    private func resolve() {
        guard !resolved else { return }
        resolved = true
        // The connection holds its delegate strongly: nothing more is wanted from it.
        connection.delegate = nil
        done.succeed(outcome)
    }
}
