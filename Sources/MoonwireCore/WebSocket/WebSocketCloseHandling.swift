import NIOCore

/// Carries out ``WebSocketCloseStateMachine`` actions on a channel, the same way for the
/// client's ``WebSocketChannelHandler`` and the server's ``WebSocketPeerHandler``. The
/// roles differ only in ``closeHandshakeEnded()``: the server ends TCP itself, the client
/// waits for the server to.
protocol WebSocketCloseHandling: AnyObject {
    var closing: WebSocketCloseStateMachine { get set }
    var discarding: Bool { get set }
    var closeTimer: ClockTask? { get set }
    var closeTimeout: TimeAmount { get }
    var context: ChannelHandlerContext? { get }

    /// Writes a close frame (no payload when `code` is nil).
    func writeClose(code: UInt16?, reason: String)
    /// Tells the owner how the connection ended; called once.
    func report(_ info: WebSocketCloseInfo)
    /// The close frames are exchanged, or the connection failed: what happens to TCP now.
    func closeHandshakeEnded()
}

extension WebSocketCloseHandling {
    func perform(_ action: WebSocketCloseStateMachine.Action) {
        switch action {
        case .none:
            break
        case .sendClose(let code, let reason):
            self.writeClose(code: code, reason: reason)
            self.armCloseTimer()
        case .echoClose(let code, let reason, let info):
            self.discarding = true
            self.writeClose(code: code, reason: reason)
            self.report(info)
            self.closeHandshakeEnded()
        case .report(let info):
            self.discarding = true
            self.report(info)
            self.closeHandshakeEnded()
        case .drop(let info):
            self.discarding = true
            self.report(info)
            self.context?.close(promise: nil)
        }
    }

    /// A close frame's payload: the code and reason, or nothing when `code` is nil.
    static func closePayload(code: UInt16?, reason: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        var payload = allocator.buffer(capacity: 2 + reason.utf8.count)
        if let code {
            payload.writeInteger(code)
            payload.writeString(reason)
        }
        return payload
    }

    /// Bounds the wait for the peer's close frame or for TCP to end.
    func armCloseTimer() {
        guard let context = self.context else { return }
        self.closeTimer?.cancel()
        self.closeTimer = RuntimeClock.of(context.eventLoop).scheduleTask(on: context.eventLoop, in: self.closeTimeout) {
            let action = self.closing.closeTimedOut()
            if case .none = action {
                // Handshake done but TCP still open.
                self.context?.close(promise: nil)
            } else {
                self.perform(action)
            }
        }
    }
}
