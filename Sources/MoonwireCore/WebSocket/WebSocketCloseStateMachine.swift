/// The closing handshake of one open connection (RFC 6455 §5.5.1, §7), as a pure state
/// machine: each event returns what to do, and the ``CloseInfo`` to report comes
/// out of exactly one transition, so a connection is reported closed exactly once.
///
/// States:
/// - `open`: data flows both ways.
/// - `closeSent`: we sent a close frame (asked to, or because the peer broke the protocol)
///   and wait for the peer's, at most `close_timeout`.
/// - `closed`: the outcome has been reported; only the TCP teardown remains.
public struct WebSocketCloseStateMachine: Sendable, Equatable {
    /// Why we sent our close frame.
    public enum Reason: Sendable, Equatable {
        /// The user closed the connection.
        case requested
        /// The peer broke the protocol; the code we sent says how.
        case failure
    }

    /// The state; see the type's documentation.
    public enum State: Sendable, Equatable {
        case open
        case closeSent(code: UInt16, reason: String, why: Reason)
        case closed
    }

    /// What the connection must do.
    public enum Action: Sendable, Equatable {
        /// Nothing.
        case none
        /// Send a close frame with this code and reason, then wait for the peer's (arm the
        /// close timer).
        case sendClose(code: UInt16, reason: String)
        /// Send a close frame (with no payload when `code` is nil) echoing the peer's,
        /// report `info`, then let the server end TCP (drop it after the close timer).
        case echoClose(code: UInt16?, reason: String, info: CloseInfo)
        /// Report `info`, then let the server end TCP (drop it after the close timer).
        case report(CloseInfo)
        /// Close TCP now and report `info`.
        case drop(CloseInfo)
    }

    /// The current state.
    public private(set) var state: State = .open

    /// Creates a machine for a connection that just opened.
    public init() {}

    /// The user asked to close.
    public mutating func closeRequested(code: UInt16, reason: String) -> Action {
        guard case .open = self.state else { return .none }
        self.state = .closeSent(code: code, reason: reason, why: .requested)
        return .sendClose(code: code, reason: reason)
    }

    /// The peer broke the protocol.
    public mutating func protocolViolation(_ violation: WebSocketProtocolViolation) -> Action {
        switch self.state {
        case .open:
            self.state = .closeSent(code: violation.code, reason: violation.reason, why: .failure)
            return .sendClose(code: violation.code, reason: violation.reason)
        case .closeSent(let code, let reason, _):
            self.state = .closed
            return .drop(CloseInfo(code: code, reason: reason, clean: false, initiator: .local))
        case .closed:
            return .none
        }
    }

    /// A valid close frame arrived.
    public mutating func peerClosed(code: UInt16?, reason: String) -> Action {
        switch self.state {
        case .open:
            self.state = .closed
            let info = CloseInfo(code: code ?? CloseCode.noStatus, reason: reason, clean: true, initiator: .peer)
            return .echoClose(code: code, reason: code == nil ? "" : reason, info: info)
        case .closeSent(let sent, let sentReason, .failure):
            self.state = .closed
            return .report(CloseInfo(code: sent, reason: sentReason, clean: false, initiator: .local))
        case .closeSent(_, _, .requested):
            self.state = .closed
            let info = CloseInfo(code: code ?? CloseCode.noStatus, reason: reason, clean: true, initiator: .local)
            return .report(info)
        case .closed:
            return .none
        }
    }

    /// `close_timeout` passed without the peer's close frame.
    public mutating func closeTimedOut() -> Action {
        guard case .closeSent(let code, let reason, let why) = self.state else { return .none }
        self.state = .closed
        switch why {
        case .requested:
            return .drop(CloseInfo(code: CloseCode.abnormal, reason: "", clean: false, initiator: .local))
        case .failure:
            return .drop(CloseInfo(code: code, reason: reason, clean: false, initiator: .local))
        }
    }

    /// The connection is to be dropped without a handshake (for example a heartbeat found
    /// the peer dead).
    public mutating func aborted() -> Action {
        if case .closed = self.state { return .none }
        self.state = .closed
        return .drop(CloseInfo(code: CloseCode.abnormal, reason: "", clean: false, initiator: .network))
    }

    /// TCP ended (EOF, reset, or our own close). Returns the outcome if not yet reported.
    public mutating func transportClosed() -> CloseInfo? {
        let info: CloseInfo
        switch self.state {
        case .open:
            info = CloseInfo(code: CloseCode.abnormal, reason: "", clean: false, initiator: .network)
        case .closeSent(_, _, .requested):
            info = CloseInfo(code: CloseCode.abnormal, reason: "", clean: false, initiator: .local)
        case .closeSent(let code, let reason, .failure):
            info = CloseInfo(code: code, reason: reason, clean: false, initiator: .local)
        case .closed:
            return nil
        }
        self.state = .closed
        return info
    }
}
