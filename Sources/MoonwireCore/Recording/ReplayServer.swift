import NIOCore

/// Plays the server's side of a recorded conversation to every client that
/// connects (`moonwire replay FILE --serve URL`): the greeting after the open,
/// then, for each recorded client message, waits for the client's message,
/// checks it with the matcher, and sends the recorded replies with their
/// recorded delays divided by `speed` (0: at once). A message that differs ends
/// that client's session with ``mismatchCode`` and a reason naming the exchange.
public final class ReplayServer: MessageServerDelegate {
    /// The close code of a session whose client sent something else than recorded.
    public static let mismatchCode: UInt16 = 4400

    /// How one client's session went.
    public struct Outcome: Sendable {
        public var peer: Int
        /// nil when every recorded client message came and matched.
        public var failure: String?
    }

    public let conversation: RecordedConversation
    public let matcher: MessageMatcher
    public let speed: Double
    /// Called on the server's loop for each peer whose session ended.
    public var onSessionEnd: ((Outcome) -> Void)?
    /// Called for each line worth telling the user (matches, mismatches).
    public var report: (String) -> Void = { _ in }

    private final class PeerState {
        var next = 0
        /// The replies are sent in order: none before the one scheduled ahead of it.
        var lastDeadline = NIODeadline.now()
        var failure: String?
        var tasks: [Scheduled<Void>] = []
    }
    private var states: [Int: PeerState] = [:]

    public init(conversation: RecordedConversation, matcher: MessageMatcher, speed: Double) {
        self.conversation = conversation
        self.matcher = matcher
        self.speed = speed
    }

    public func server(_ server: MessageServer, accepting event: AcceptPause) {
        report("server \(server.url): \(event)")
    }

    public func server(_ server: MessageServer, didConnect peer: ServerPeer, request: ServerPeerRequest) {
        let state = PeerState()
        states[peer.id] = state
        report("peer \(peer.id): connected")
        if let first = conversation.exchanges.first, first.sent == nil {
            state.next = 1
            play(first, after: conversation.openTime, to: peer, state: state, loop: server.eventLoop)
        } else {
            closeIfDone(peer, state: state, loop: server.eventLoop, after: conversation.openTime)
        }
    }

    public func session(_ peer: ServerPeer, didReceive message: ByteBuffer, kind: MessageKind) {
        guard let state = states[peer.id], state.failure == nil else { return }
        let bytes = Array(message.readableBytesView)
        guard state.next < conversation.exchanges.count, let expected = conversation.exchanges[state.next].sent else {
            fail(peer, state: state, "exchange \(state.next + 1): the recording has no more client messages, got \(matcher.shown(bytes, kind: kind))")
            return
        }
        let exchange = conversation.exchanges[state.next]
        if let diff = matcher.difference(expected: expected, actual: bytes, kind: kind) {
            fail(peer, state: state, "exchange \(exchange.number): the client's message differs from the recording\n" + diff)
            return
        }
        report("peer \(peer.id): exchange \(exchange.number) matched")
        state.next += 1
        play(exchange, after: expected.time, to: peer, state: state, loop: peer.channel.eventLoop)
    }

    /// A peer that broke the protocol: its close, which follows, ends its session.
    public func session(_ peer: ServerPeer, didFail error: ConnectionError) {}

    public func session(_ peer: ServerPeer, didClose info: CloseInfo) {
        guard let state = states.removeValue(forKey: peer.id) else { return }
        state.tasks.forEach { $0.cancel() }
        var failure = state.failure
        if failure == nil, state.next < conversation.exchanges.count {
            failure = "the client closed (\(info.code)) before exchange \(conversation.exchanges[state.next].number) of \(conversation.exchanges.count)"
            report("peer \(peer.id): \(failure!)")
        }
        onSessionEnd?(Outcome(peer: peer.id, failure: failure))
    }

    private func delay(from: Double, to: Double) -> TimeAmount {
        guard speed > 0 else { return .zero }
        return .nanoseconds(Int64(max(0, to - from) / speed * 1e9))
    }

    private func play(_ exchange: RecordedExchange, after start: Double, to peer: ServerPeer, state: PeerState, loop: EventLoop) {
        let now = NIODeadline.now()
        for reply in exchange.replies {
            let deadline = max(now + delay(from: start, to: reply.time), state.lastDeadline)
            state.lastDeadline = deadline
            state.tasks.append(loop.scheduleTask(deadline: deadline) { [weak peer] in
                _ = try? peer?.send(ByteBuffer(bytes: reply.data), kind: reply.kind)
            })
        }
        closeIfDone(peer, state: state, loop: loop, after: exchange.replies.last?.time ?? start)
    }

    /// After the last exchange, a close the server made in the recording is made again.
    private func closeIfDone(_ peer: ServerPeer, state: PeerState, loop: EventLoop, after last: Double) {
        guard state.next >= conversation.exchanges.count, let close = conversation.serverClose else { return }
        let deadline = max(NIODeadline.now() + delay(from: last, to: close.time), state.lastDeadline)
        state.tasks.append(loop.scheduleTask(deadline: deadline) { [weak peer] in
            _ = try? peer?.close(code: close.code, reason: close.reason)
        })
    }

    /// The first line, cut to what a close frame carries (123 bytes), on a character boundary.
    static func closeReason(_ message: String) -> String {
        var reason = ""
        for ch in message.prefix(while: { $0 != "\n" }) {
            if reason.utf8.count + String(ch).utf8.count > WebSocketClose.maxReason { break }
            reason.append(ch)
        }
        return reason
    }

    private func fail(_ peer: ServerPeer, state: PeerState, _ message: String) {
        state.failure = message
        state.tasks.forEach { $0.cancel() }
        report("peer \(peer.id): MISMATCH at " + message)
        _ = try? peer.close(code: Self.mismatchCode, reason: Self.closeReason(message))
    }
}
