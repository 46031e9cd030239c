import NIOCore


/// One open WebSocket, either role, on the channel: parses and assembles what the peer
/// sends (``WebSocketInbound``), answers pings, runs the close handshake
/// (``WebSocketCloseStateMachine``) and frames what we send (``WebSocketFramer``),
/// compressed and fragmented as negotiated. The role decides two things only: masking
/// (a client masks what it sends and expects unmasked frames, a server the reverse) and
/// who ends TCP once the close handshake is over (the server, RFC 6455 §7.1.1: right
/// after the last frame went out; a client waits for it, at most `closeTimeout`).
///
/// The outbound side is ``ChannelOutbound``, shared with ``FramedChannelHandler``: writes
/// made while a read is delivered go out with one flush at channelReadComplete, others
/// with one flush at the end of the loop tick. Small messages from a caller's bytes are
/// framed into one shared buffer. A write from outside (raw bytes) goes after what was
/// gathered before it. The connection's send budget (``OutboundBuffer``) writes to this
/// handler and hears from it when the channel becomes writable again.
///
/// ```swift
/// let handler = WebSocketHandler(role: .server, owner: peer, maxMessage: 1 << 20, deflate: nil, closeTimeout: .seconds(5))
/// try channel.pipeline.syncOperations.addHandler(handler)
/// try handler.send(ByteBuffer(string: "hello"), kind: .text)
/// handler.close(try WebSocketClose(code: 1000, reason: "bye"))
/// ```
final class WebSocketHandler<Owner: ChannelOwner>: ChannelDuplexHandler, RemovableChannelHandler, EndOfTickFlushing {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Messages up to this size are framed into one shared buffer (``ChannelOutbound``'s
    /// gathered buffer) rather than a buffer each: a burst of small messages then costs the
    /// channel one write.
    static var gatherMessageLimit: Int { 4096 }
    static var gatherBufferLimit: Int { ChannelOutbound.gatherBufferLimit }

    let role: WebSocketRole
    private var inbound: WebSocketInbound
    private var closing = WebSocketCloseStateMachine()
    private var framer: WebSocketFramer
    /// The compression state, when negotiated (its frames are this connection's only).
    private(set) var deflate: PerMessageDeflate?
    private let closeTimeout: TimeAmount
    private let fragmentSize: Int?
    /// Held until the close is reported (or the handler leaves the pipeline): an open
    /// client connection is kept alive by its channel.
    private var owner: Owner?
    private var context: ChannelHandlerContext?
    /// True once the outcome is decided (failure, close handshake): later input is ignored.
    private var discarding = false
    /// Gathering, flush batching and writability.
    /// The gathered writes, flush batching and writability; holds the connection's send
    /// budget, told when the channel becomes writable again.
    let outbound = ChannelOutbound()
    private var closeTimer: ClockTask?
    /// The kind and compression of an outbound message being sent in fragments.
    private var outboundMessage: (kind: MessageKind, compressed: Bool)?

    init(
        role: WebSocketRole,
        owner: Owner,
        maxMessage: Int,
        deflate: PerMessageDeflate?,
        closeTimeout: TimeAmount,
        fragmentSize: Int? = nil
    ) {
        self.role = role
        self.owner = owner
        self.inbound = WebSocketInbound(role: role, maxMessage: maxMessage, deflate: deflate)
        self.framer = WebSocketFramer(role: role)
        self.deflate = deflate
        self.closeTimeout = closeTimeout
        self.fragmentSize = fragmentSize.map { max(1, $0) }
    }

    /// True while messages may be sent.
    var isOpen: Bool {
        if case .open = self.closing.state, self.context != nil { return true }
        return false
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.outbound.added(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.outbound.removed()
        self.closeTimer?.cancel()
        self.owner = nil
        // A server peer outlives its connection while a script holds it, which for a Lua
        // script means until the garbage collector gets to it (it sees a small userdata,
        // not what hangs off it): let go now of a message being assembled (up to 1 MiB
        // reserved) and of the zlib streams (~300 KiB), which kept a server under attack
        // at tens of MiB.
        self.inbound = WebSocketInbound(role: self.role, maxMessage: self.inbound.maxMessage, deflate: nil)
        self.deflate = nil
    }

    // MARK: Inbound

    // The pipeline calls a handler through its protocol witness, which for a generic class
    // is the unspecialized code: `Owner`'s methods through its witness table, NIOAny
    // unwrapped by a dynamic cast. These specializations are entered from it on a check of
    // `Owner`.
    @_specialize(exported: false, where Owner == ClientConnection)
    @_specialize(exported: false, where Owner == ServerPeer)
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = self.unwrapInboundIn(data)
        self.outbound.readStarted()
        // Everything complete in this read, until more bytes are needed or the outcome is
        // decided.
        while !self.discarding {
            let action: WebSocketMessageAssembler.Action
            do {
                guard let next = try self.inbound.next(&buffer) else { return }
                action = next
            } catch {
                self.protocolViolation(error)
                return
            }
            switch action {
            case .none:
                break
            case .message(let message, let kind):
                self.owner?.handlerReceived(message, kind: kind)
            case .ping(let payload):
                self.owner?.handlerReceivedPing()
                if case .open = self.closing.state {
                    self.write(self.framer.frame(.pong, payload: payload, allocator: self.outbound.allocator))
                }
            case .pong(let payload):
                self.owner?.handlerReceivedPong(payload)
            case .close(let code, let reason):
                self.perform(self.closing.peerClosed(code: code, reason: reason))
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.outbound.readComplete(context)
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.outbound.writabilityChanged(context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.closeTimer?.cancel()
        if let info = self.closing.transportClosed() {
            self.report(info)
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Resets and TLS truncation end the transport; channelInactive reports the outcome.
        context.close(promise: nil)
    }

    /// Fails the connection (RFC 6455 §7.1.7) with the violation's code: nothing more from
    /// the peer is processed. A server also ends TCP once its close frame is flushed; the
    /// report (our code, not clean) follows when the channel goes inactive.
    private func protocolViolation(_ violation: WebSocketProtocolViolation) {
        let action = self.closing.protocolViolation(violation)
        self.discarding = true
        guard case .sendClose = action else { return self.perform(action) }
        self.owner?.handlerFailed(.protocolViolation(violation))
        self.perform(action)
        if self.role == .server { self.closeHandshakeEnded() }
    }

    // MARK: Outbound

    /// Sends a whole message, compressed and fragmented as configured.
    func send(_ data: ByteBuffer, kind: MessageKind) throws(UsageError) {
        try self.checkMessageCanGo()
        let allocator = self.outbound.allocator
        if let deflate = self.deflate, deflate.shouldCompress(data.readableBytes) {
            var compressed = try Self.compress(data, deflate: deflate, isFinal: true, allocator: allocator)
            if let size = self.fragmentSize, compressed.readableBytes > size {
                self.writeFragmented(&compressed, opcode: kind.opcode, rsv1: true, size: size, allocator: allocator)
            } else {
                self.framer.frameInPlace(kind.opcode, fin: true, rsv1: true, buffer: &compressed)
                self.write(compressed)
            }
        } else if let size = self.fragmentSize, data.readableBytes > size {
            var data = data
            self.writeFragmented(&data, opcode: kind.opcode, rsv1: false, size: size, allocator: allocator)
        } else {
            self.write(self.framer.frame(kind.opcode, payload: data, allocator: allocator))
        }
    }

    /// Sends a whole message from bytes the caller owns for the duration of the call (a
    /// Lua string): framed straight from them when it goes out as one uncompressed frame,
    /// else through ``send(_:kind:)``.
    func send(bytes: UnsafeRawBufferPointer, kind: MessageKind) throws(UsageError) {
        guard let context = self.context, case .open = self.closing.state, self.outboundMessage == nil,
            self.goesAsOnePlainFrame(bytes.count)
        else {
            return try self.send(ByteBuffer(bytes: bytes), kind: kind)
        }
        guard bytes.count <= Self.gatherMessageLimit else {
            self.write(self.framer.frame(kind.opcode, payload: bytes, allocator: self.outbound.allocator))
            return
        }
        var gathered = self.outbound.takeGathered(capacity: max(512, WebSocketFramer.maxHeaderSize + bytes.count))
        self.framer.append(kind.opcode, payload: bytes, to: &gathered)
        self.outbound.gathered(gathered, context: context, flusher: self)
    }

    /// True when a message of `size` bytes goes out as one uncompressed frame (not
    /// compressed by permessage-deflate, not cut into fragments).
    private func goesAsOnePlainFrame(_ size: Int) -> Bool {
        !(self.deflate?.shouldCompress(size) ?? false) && size <= self.fragmentSize ?? .max
    }

    /// A whole message as one frame made now from the caller's bytes, for a message that
    /// has to wait in the send queue: nil when it would be compressed or fragmented (those
    /// depend on the connection that sends it). An uncompressed frame is valid on any
    /// later connection too, with or without permessage-deflate.
    func frame(bytes: UnsafeRawBufferPointer, kind: MessageKind) -> ByteBuffer? {
        guard self.context != nil, self.goesAsOnePlainFrame(bytes.count) else { return nil }
        return self.framer.frame(kind.opcode, payload: bytes, allocator: self.outbound.allocator)
    }

    /// Adds a frame made now from `bytes` at the end of `frames` (made by
    /// ``frame(bytes:kind:)``), when the message is one this handler would gather and
    /// `frames` stays within what it gathers into one buffer; false otherwise.
    func appendFrame(bytes: UnsafeRawBufferPointer, kind: MessageKind, to frames: inout ByteBuffer) -> Bool {
        guard self.context != nil, bytes.count <= Self.gatherMessageLimit,
            frames.readableBytes + WebSocketFramer.maxHeaderSize + bytes.count <= Self.gatherBufferLimit,
            self.goesAsOnePlainFrame(bytes.count)
        else { return false }
        self.framer.append(kind.opcode, payload: bytes, to: &frames)
        return true
    }

    /// Writes finished frames as they are: made by ``frame(bytes:kind:)`` and
    /// ``appendFrame(bytes:kind:to:)``, or a server's broadcast, one buffer for every peer.
    func sendFrame(_ frame: ByteBuffer) throws(UsageError) {
        try self.checkMessageCanGo()
        self.write(frame)
    }

    /// Sends one fragment of a message whose size the caller does not know up front.
    func sendFragment(_ data: ByteBuffer, kind: MessageKind, isFinal: Bool) throws(UsageError) {
        guard self.context != nil, case .open = self.closing.state else {
            throw .notOpen
        }
        let first = self.outboundMessage == nil
        if let current = self.outboundMessage, current.kind != kind {
            throw .fragmentKindChanged(kind, sending: current.kind)
        }
        let compressed = self.outboundMessage?.compressed ?? (self.deflate?.canCompress ?? false)
        self.outboundMessage = isFinal ? nil : (kind, compressed)
        let opcode = first ? kind.opcode : .continuation
        if compressed, let deflate = self.deflate {
            var payload = try Self.compress(data, deflate: deflate, isFinal: isFinal, allocator: self.outbound.allocator)
            self.framer.frameInPlace(opcode, fin: isFinal, rsv1: first, buffer: &payload)
            self.write(payload)
        } else {
            self.write(self.framer.frame(opcode, fin: isFinal, payload: data, allocator: self.outbound.allocator))
        }
    }

    /// Sends a ping (at most 125 bytes of payload).
    func ping(_ payload: ByteBuffer) throws(UsageError) {
        guard self.context != nil, case .open = self.closing.state else {
            throw .notOpen
        }
        let ping: WebSocketPing
        do {
            ping = try WebSocketPing(payload)
        } catch {
            throw .control(error)
        }
        self.write(self.framer.frame(.ping, payload: ping.payload, allocator: self.outbound.allocator))
    }

    /// Starts the close handshake; nothing when it has started already.
    func close(_ close: WebSocketClose) {
        self.perform(self.closing.closeRequested(code: close.code, reason: close.reason))
    }

    /// Drops the connection without a close frame, reported as 1006 by the network with
    /// `reason`; with `reset`, RST instead of FIN.
    func abort(reset: Bool = false, reason: String = "") {
        guard case .drop(var info) = self.closing.aborted() else { return }
        self.discarding = true
        info.reason = reason
        self.report(info)
        self.context?.close(reset: reset)
    }

    /// Throws unless a whole message may be sent now.
    private func checkMessageCanGo() throws(UsageError) {
        guard self.context != nil, case .open = self.closing.state else {
            throw .notOpen
        }
        guard self.outboundMessage == nil else {
            throw .fragmentedMessageUnfinished
        }
    }

    private static func compress(
        _ data: ByteBuffer,
        deflate: PerMessageDeflate,
        isFinal: Bool,
        allocator: ByteBufferAllocator
    ) throws(UsageError) -> ByteBuffer {
        do {
            return try deflate.deflate(data, isFinal: isFinal, headroom: WebSocketFramer.maxHeaderSize, allocator: allocator)
        } catch {
            throw .compressionFailed("\(error)")
        }
    }

    private func writeFragmented(_ data: inout ByteBuffer, opcode: WebSocketFrameOpcode, rsv1: Bool, size: Int, allocator: ByteBufferAllocator) {
        var first = true
        while data.readableBytes > 0 {
            let piece = data.readSlice(length: min(size, data.readableBytes))!
            let frame = self.framer.frame(
                first ? opcode : .continuation,
                fin: data.readableBytes == 0,
                rsv1: first && rsv1,
                payload: piece,
                allocator: allocator
            )
            self.write(frame)
            first = false
        }
    }

    private func write(_ frame: ByteBuffer) {
        guard let context = self.context else { return }
        self.outbound.write(frame, context: context, flusher: self)
    }

    func flushAtEndOfTick() {
        self.outbound.flushAtEndOfTick(self.context)
    }

    // MARK: Outbound from the channel

    /// A write from outside this handler (raw bytes) goes after the frames gathered before it.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.outbound.writeGathered(context)
        context.write(data, promise: promise)
    }

    /// A flush from outside (the send budget's) writes the gathered frames too.
    func flush(context: ChannelHandlerContext) {
        self.outbound.writeGathered(context)
        context.flush()
    }

    // MARK: Close handshake

    private func perform(_ action: WebSocketCloseStateMachine.Action) {
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

    /// A close frame with `code` and `reason` (none when `code` is nil): ours, which
    /// ``WebSocketClose`` checked, or the echo of the peer's, which the parser checked.
    private func writeClose(code: UInt16?, reason: String) {
        guard self.context != nil else { return }
        let close = code.map { WebSocketClose(checked: $0, reason: reason) }
        self.write(self.framer.frame(close, allocator: self.outbound.allocator))
    }

    /// The close frames are exchanged, or a server failed the connection: a server ends
    /// TCP once the last frame went out (RFC 6455 §7.1.1), a client waits for it to. The
    /// close timer drops TCP if that does not happen in time.
    private func closeHandshakeEnded() {
        if self.role == .server, let context = self.context {
            self.outbound.writeGathered(context)
            let flushed = context.eventLoop.makePromise(of: Void.self)
            context.write(self.wrapOutboundOut(ByteBuffer()), promise: flushed)
            context.flush()
            flushed.futureResult.assumeIsolated().whenComplete { _ in self.context?.close(promise: nil) }
        }
        self.armCloseTimer()
    }

    /// Bounds the wait for the peer's close frame or for TCP to end.
    private func armCloseTimer() {
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

    private func report(_ info: CloseInfo) {
        let owner = self.owner
        self.owner = nil
        owner?.handlerClosed(info)
    }
}
