import NIOCore

/// Turns parsed frames into messages and control events, enforcing the rules that need
/// message context (RFC 6455 §5.4–5.6, RFC 7692 §6): continuation order, reserved bits,
/// `max_message`, UTF-8 of text messages (checked as each chunk arrives, so a bad message
/// is refused before it is complete) and close frame payloads.
///
/// States: idle (between messages) or inside a data message; independently, inside a
/// control frame, which may interleave with a fragmented message.
struct WebSocketMessageAssembler {
    /// What the connection must do after a frame event.
    enum Action: Equatable {
        /// Nothing yet; more bytes are needed.
        case none
        /// A complete data message.
        case message(ByteBuffer, MessageKind)
        /// A ping to answer with a pong carrying the same payload.
        case ping(ByteBuffer)
        /// A pong.
        case pong(ByteBuffer)
        /// The peer's close frame; `code` is nil when it carried no payload.
        case close(code: UInt16?, reason: String)
    }

    private enum Message {
        case idle
        case receiving(kind: MessageKind, compressed: Bool)
    }

    private enum Frame {
        case data(fin: Bool, length: Int)
        case control(opcode: WebSocketFrameOpcode)
    }

    let maxMessage: Int
    /// The most a message buffer reserves before its bytes arrive.
    static let initialReservation = 1 << 20
    private let deflate: PerMessageDeflate?
    private var message: Message = .idle
    private var frame: Frame = .data(fin: true, length: 0)
    /// The message so far, when it spans more than one payload chunk.
    private var buffer: ByteBuffer?
    private var received = 0
    private var utf8 = UTF8Validator()
    private var control = ByteBuffer()

    init(maxMessage: Int, deflate: PerMessageDeflate?) {
        self.maxMessage = maxMessage
        self.deflate = deflate
    }

    /// Feeds one parser event.
    mutating func handle(_ event: WebSocketFrameParser.Event) throws(WebSocketProtocolViolation) -> Action {
        switch event {
        case .header(let header):
            try self.begin(header)
            return .none
        case .payload(let chunk, let complete):
            switch self.frame {
            case .control(let opcode):
                return try self.controlPayload(chunk, complete: complete, opcode: opcode)
            case .data(let fin, let length):
                return try self.dataPayload(chunk, complete: complete, fin: fin, frameLength: length)
            }
        }
    }

    private mutating func begin(_ header: WebSocketFrameHeader) throws(WebSocketProtocolViolation) {
        if header.rsv2 || header.rsv3 {
            throw .protocolError("reserved bits set without a negotiated extension")
        }
        if header.isControl {
            if header.rsv1 { throw .protocolError("reserved bit set on a control frame") }
            self.frame = .control(opcode: header.opcode)
            self.control.clear()
            return
        }
        switch (header.opcode, self.message) {
        case (.continuation, .idle):
            throw .protocolError("continuation frame without a message to continue")
        case (.continuation, .receiving):
            if header.rsv1 { throw .protocolError("RSV1 set on a continuation frame") }
        case (_, .receiving):
            throw .protocolError("new message started before the previous one finished")
        case (let opcode, .idle):
            if header.rsv1 && self.deflate == nil {
                throw .protocolError("reserved bits set without a negotiated extension")
            }
            self.message = .receiving(kind: opcode == .text ? .text : .binary, compressed: header.rsv1)
            self.received = 0
            self.utf8.reset()
        }
        if case .receiving(_, false) = self.message, self.received + header.length > self.maxMessage {
            throw .tooBig(self.maxMessage)
        }
        self.frame = .data(fin: header.fin, length: header.length)
    }

    private mutating func dataPayload(
        _ chunk: ByteBuffer,
        complete: Bool,
        fin: Bool,
        frameLength: Int
    ) throws(WebSocketProtocolViolation) -> Action {
        guard case .receiving(let kind, let compressed) = self.message else { return .none }
        let last = complete && fin
        if compressed {
            return try self.compressedPayload(chunk, last: last, kind: kind)
        }
        if kind == .text && !self.utf8.feed(chunk) {
            throw .invalidPayload("invalid UTF-8 in text message")
        }
        self.received += chunk.readableBytes
        if last && self.buffer == nil {
            // The whole message came in one piece: hand out the read buffer's slice as is.
            return try self.finish(chunk, kind: kind)
        }
        if self.buffer == nil {
            // Sized for this frame (which the header check bounded by max_message), but at
            // most 1 MiB up front: a peer that claims a long frame and sends little must
            // not make every connection hold max_message. Longer messages grow by doubling.
            var fresh = ByteBuffer()
            fresh.reserveCapacity(max(min(frameLength, Self.initialReservation), chunk.readableBytes))
            self.buffer = fresh
        }
        var chunk = chunk
        self.buffer!.writeBuffer(&chunk)
        guard last else { return .none }
        let whole = self.buffer!
        self.buffer = nil
        return try self.finish(whole, kind: kind)
    }

    private mutating func compressedPayload(
        _ chunk: ByteBuffer,
        last: Bool,
        kind: MessageKind
    ) throws(WebSocketProtocolViolation) -> Action {
        guard let deflate = self.deflate else { return .none }
        var output = self.buffer ?? ByteBuffer()
        self.buffer = nil
        let before = output.writerIndex
        var input = chunk
        try deflate.inflate(&input, into: &output, maxMessage: self.maxMessage)
        if last {
            try deflate.finishMessage(into: &output, maxMessage: self.maxMessage)
        }
        if kind == .text {
            let fresh = output.getSlice(at: before, length: output.writerIndex - before)!
            if !self.utf8.feed(fresh) {
                throw .invalidPayload("invalid UTF-8 in text message")
            }
        }
        guard last else {
            self.buffer = output
            return .none
        }
        return try self.finish(output, kind: kind)
    }

    private mutating func finish(_ message: ByteBuffer, kind: MessageKind) throws(WebSocketProtocolViolation) -> Action {
        self.message = .idle
        if kind == .text && !self.utf8.isComplete {
            throw .invalidPayload("text message ends inside a UTF-8 sequence")
        }
        return .message(message, kind)
    }

    private mutating func controlPayload(_ chunk: ByteBuffer, complete: Bool, opcode: WebSocketFrameOpcode) throws(WebSocketProtocolViolation) -> Action {
        var payload = chunk
        if !complete || self.control.readableBytes > 0 {
            var chunk = chunk
            self.control.writeBuffer(&chunk)
            guard complete else { return .none }
            payload = self.control
        }
        switch opcode {
        case .ping:
            return .ping(payload)
        case .pong:
            return .pong(payload)
        default:
            return try Self.parseClose(payload)
        }
    }

    /// Validates a close frame payload: empty, or a valid code plus a UTF-8 reason.
    static func parseClose(_ payload: ByteBuffer) throws(WebSocketProtocolViolation) -> Action {
        var payload = payload
        if payload.readableBytes == 0 { return .close(code: nil, reason: "") }
        guard let code = payload.readInteger(as: UInt16.self) else {
            throw .protocolError("close frame with a 1-byte payload")
        }
        guard CloseCode.isValidOnWire(code) else {
            throw .protocolError("invalid close code \(code)")
        }
        var utf8 = UTF8Validator()
        guard utf8.feed(payload), utf8.isComplete else {
            throw .invalidPayload("invalid UTF-8 in close reason")
        }
        return .close(code: code, reason: String(buffer: payload))
    }
}

/// The inbound half of one WebSocket connection, the same for both roles: bytes in, what
/// to do out. The role only decides masking in the parser; ``WebSocketHandler`` loops
/// over ``next(_:)``.
struct WebSocketInbound {
    private var parser: WebSocketFrameParser
    private var assembler: WebSocketMessageAssembler

    init(role: WebSocketRole, maxMessage: Int, deflate: PerMessageDeflate?) {
        self.parser = WebSocketFrameParser(maxPayload: maxMessage, role: role)
        self.assembler = WebSocketMessageAssembler(maxMessage: maxMessage, deflate: deflate)
    }

    var maxMessage: Int { self.assembler.maxMessage }

    /// The next thing to act on from `buffer`, or nil when it needs more bytes. After a
    /// throw the connection is failed with the violation's code; call no more.
    mutating func next(_ buffer: inout ByteBuffer) throws(WebSocketProtocolViolation) -> WebSocketMessageAssembler.Action? {
        while let event = try self.parser.next(&buffer) {
            let action = try self.assembler.handle(event)
            if case .none = action { continue }
            return action
        }
        return nil
    }
}
