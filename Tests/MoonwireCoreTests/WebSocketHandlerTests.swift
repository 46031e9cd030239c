import NIOCore
import NIOEmbedded
import Testing

@testable import MoonwireCore

/// ``WebSocketHandler`` in both roles on NIO's `EmbeddedChannel`, at the byte level: the
/// peer's frames go in as bytes, what the handler writes comes out as bytes and is parsed
/// here independently of the handler's own parser.
@Suite("WebSocket handler on an embedded channel, both roles", .timeLimit(.minutes(5)))
struct WebSocketHandlerTests {
    static let roles: [WebSocketRole] = [.client, .server]

    // MARK: Messages

    @Test("a message each way: the client masks what it sends, the server does not", arguments: roles)
    func messageEachWay(role: WebSocketRole) throws {
        let end = try End(role)
        try end.receive(.text, "hello")
        #expect(end.owner.messages == [.init(kind: .text, text: "hello")])

        try end.handler.send(ByteBuffer(string: "world"), kind: .binary)
        end.tick()
        let frames = try end.sent()
        #expect(frames == [Frame(opcode: .binary, payload: "world", masked: role == .client)])
    }

    @Test("small messages from a caller's bytes go out in one buffer, ahead of a raw write", arguments: roles)
    func gatheredThenRaw(role: WebSocketRole) throws {
        let end = try End(role)
        for text in ["a", "bb", "ccc"] {
            try Array(text.utf8).withUnsafeBytes { try end.handler.send(bytes: $0, kind: .text) }
        }
        end.channel.write(ByteBuffer(bytes: [0x89, 0x00]), promise: nil)  // a raw unmasked ping
        end.channel.flush()
        let writes = try end.writes()
        #expect(writes.count == 2, "the three frames in one buffer, then the raw bytes")
        var all = ByteBuffer()
        for var write in writes { all.writeBuffer(&write) }
        let frames = try Frame.parse(all)
        #expect(frames.map(\.opcode) == [.text, .text, .text, .ping])
        #expect(frames.prefix(3).map(\.text) == ["a", "bb", "ccc"])
        #expect(frames.prefix(3).allSatisfy { $0.masked == (role == .client) })
    }

    @Test("the loop's spare gathered buffer: reused once the channel is done with it, never written into while it is not", arguments: roles)
    func spareGatherBuffer(role: WebSocketRole) throws {
        let end = try End(role)
        let spare = SpareGatherBuffer.shared(on: end.channel.embeddedEventLoop)
        spare.buffer = nil
        func send(_ text: String) throws {
            try Array(text.utf8).withUnsafeBytes { try end.handler.send(bytes: $0, kind: .text) }
            end.tick()
        }
        func storage(_ buffer: ByteBuffer?) -> UInt? {
            buffer?.withVeryUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        }
        // Written and read back: nothing but the spare holds the buffer, so the next
        // message is gathered into the same storage.
        try send("zero")
        #expect(try end.sent().map(\.text) == ["zero"])
        let kept = storage(spare.buffer)
        #expect(kept != nil, "the buffer written last waits as the spare")
        try send("first")
        let held = try end.writes()  // the test holds the first buffer from now on
        #expect(held.count == 1)
        #expect(storage(held[0]) == kept)
        // Still held: the next message goes into other storage, the held bytes stay.
        let before = Array(held[0].readableBytesView)
        try send("second")
        let second = try end.writes()
        #expect(storage(second[0]) != kept)
        #expect(Array(held[0].readableBytesView) == before, "a buffer the channel still holds is not written into")
        #expect(try Frame.parse(held[0]).map(\.text) == ["first"])
        #expect(try Frame.parse(second[0]).map(\.text) == ["second"])
    }

    @Test("a fragmented message with a ping between its fragments: pong first, then the message", arguments: roles)
    func fragmentsIn(role: WebSocketRole) throws {
        let end = try End(role)
        try end.receive(Frame(opcode: .text, fin: false, payload: "frag"))
        try end.receive(Frame(opcode: .ping, payload: "p1"))
        try end.receive(Frame(opcode: .continuation, fin: false, payload: "men"))
        #expect(end.owner.messages.isEmpty)
        try end.receive(Frame(opcode: .continuation, payload: "ted ✓"))
        #expect(end.owner.messages == [.init(kind: .text, text: "fragmented ✓")])
        #expect(end.owner.pings == 1)
        // Written during the read, flushed at its end: no loop tick needed.
        #expect(try end.sent() == [Frame(opcode: .pong, payload: "p1", masked: role == .client)])
    }

    @Test("fragments out: by fragment size, and piece by piece with sendFragment", arguments: roles)
    func fragmentsOut(role: WebSocketRole) throws {
        let end = try End(role, fragmentSize: 4)
        try end.handler.send(ByteBuffer(string: "0123456789"), kind: .binary)
        try end.handler.sendFragment(ByteBuffer(string: "ab"), kind: .text, isFinal: false)
        #expect(throws: UsageError.fragmentedMessageUnfinished) {
            try end.handler.send(ByteBuffer(string: "x"), kind: .text)
        }
        try end.handler.sendFragment(ByteBuffer(string: "cd"), kind: .text, isFinal: true)
        end.tick()
        let masked = role == .client
        #expect(try end.sent() == [
            Frame(opcode: .binary, fin: false, payload: "0123", masked: masked),
            Frame(opcode: .continuation, fin: false, payload: "4567", masked: masked),
            Frame(opcode: .continuation, payload: "89", masked: masked),
            Frame(opcode: .text, fin: false, payload: "ab", masked: masked),
            Frame(opcode: .continuation, payload: "cd", masked: masked),
        ])
    }

    // MARK: permessage-deflate

    @Test("permessage-deflate both ways: RSV1 on the first frame, the peer's zlib agrees", arguments: roles)
    func deflate(role: WebSocketRole) throws {
        let peerZlib = try PerMessageDeflate(parameters: PerMessageDeflateParameters())
        let end = try End(role, deflate: try PerMessageDeflate(parameters: PerMessageDeflateParameters()))
        let text = String(repeating: "moonwire compresses this line. ", count: 40)

        // In: compressed by the peer, in two fragments.
        var compressed = try peerZlib.deflate(ByteBuffer(string: text), isFinal: true, headroom: 0, allocator: ByteBufferAllocator())
        let half = compressed.readSlice(length: compressed.readableBytes / 2)!
        try end.receive(Frame(opcode: .text, fin: false, rsv1: true, payload: Array(half.readableBytesView)))
        try end.receive(Frame(opcode: .continuation, payload: Array(compressed.readableBytesView)))
        #expect(end.owner.messages == [.init(kind: .text, text: text)])

        // Out: compressed, and small messages are not.
        try end.handler.send(ByteBuffer(string: text), kind: .text)
        try end.handler.send(ByteBuffer(string: "tiny"), kind: .text)
        end.tick()
        let frames = try end.sent()
        #expect(frames.count == 2)
        #expect(frames[0].rsv1 && frames[0].fin && frames[0].opcode == .text && frames[0].masked == (role == .client))
        #expect(frames[0].payload.count < text.utf8.count / 4)
        var wire = ByteBuffer(bytes: frames[0].payload)
        var inflated = ByteBuffer()
        try peerZlib.inflate(&wire, into: &inflated, maxMessage: 1 << 20)
        try peerZlib.finishMessage(into: &inflated, maxMessage: 1 << 20)
        #expect(String(buffer: inflated) == text)
        #expect(frames[1] == Frame(opcode: .text, payload: "tiny", masked: role == .client))
    }

    // MARK: Ping and pong

    @Test("ping out within 125 bytes, refused above in the core's words; pongs reach the owner", arguments: roles)
    func pingOut(role: WebSocketRole) throws {
        let end = try End(role)
        try end.handler.ping(ByteBuffer(bytes: [UInt8](repeating: 7, count: 125)))
        #expect(throws: UsageError.control(.pingTooLong)) {
            try end.handler.ping(ByteBuffer(bytes: [UInt8](repeating: 7, count: 126)))
        }
        end.tick()
        #expect(try end.sent() == [Frame(opcode: .ping, payload: [UInt8](repeating: 7, count: 125), masked: role == .client)])
        try end.receive(Frame(opcode: .pong, payload: "p"))
        #expect(end.owner.pongs == ["p"])
        #expect(try end.sent().isEmpty, "a pong is not answered")
    }

    // MARK: Close handshake

    @Test("the peer closes: our echo carries its code and reason; the server ends TCP, the client waits for it", arguments: roles)
    func peerCloses(role: WebSocketRole) throws {
        let end = try End(role)
        try end.receive(Frame(close: 4001, "bye"))
        #expect(try end.sent() == [Frame(close: 4001, "bye", masked: role == .client)])
        #expect(end.owner.closes == [CloseInfo(code: 4001, reason: "bye", clean: true, initiator: .peer)])
        #expect(throws: UsageError.notOpen) { try end.handler.send(ByteBuffer(string: "late"), kind: .text) }
        try end.receive(.text, "ignored after the close")
        #expect(end.owner.messages.isEmpty)
        end.expectTCPEndsByRole()
        #expect(end.owner.closes.count == 1)
    }

    @Test("a close frame without a code is echoed without one and reported as 1005", arguments: roles)
    func peerClosesWithoutCode(role: WebSocketRole) throws {
        let end = try End(role)
        try end.receive(Frame(opcode: .close, payload: []))
        #expect(try end.sent() == [Frame(opcode: .close, payload: [], masked: role == .client)])
        #expect(end.owner.closes == [CloseInfo(code: 1005, reason: "", clean: true, initiator: .peer)])
    }

    @Test("we close: our close frame, the peer's answer, a clean close by us", arguments: roles)
    func weClose(role: WebSocketRole) throws {
        let end = try End(role)
        end.handler.close(try WebSocketClose(code: 3000, reason: "done"))
        end.tick()
        #expect(try end.sent() == [Frame(close: 3000, "done", masked: role == .client)])
        #expect(end.owner.closes.isEmpty)
        try end.receive(.text, "still delivered while closing")
        #expect(end.owner.messages.count == 1)
        try end.receive(Frame(close: 3000, "done"))
        #expect(end.owner.closes == [CloseInfo(code: 3000, reason: "done", clean: true, initiator: .local)])
        #expect(try end.sent().isEmpty, "no second close frame")
        end.tick()
        #expect(end.channel.isActive == (role == .client))
    }

    @Test("we close and the peer never answers: 1006 after the close timeout", arguments: roles)
    func closeTimesOut(role: WebSocketRole) throws {
        let end = try End(role)
        end.handler.close(try WebSocketClose(code: 1000, reason: ""))
        end.tick()
        _ = try end.sent()
        end.channel.embeddedEventLoop.advanceTime(by: End.closeTimeout)
        #expect(end.owner.closes == [CloseInfo(code: 1006, reason: "", clean: false, initiator: .local)])
        #expect(!end.channel.isActive)
    }

    @Test("abort: no close frame, 1006 by the network with the reason given", arguments: roles)
    func abort(role: WebSocketRole) throws {
        let end = try End(role)
        end.handler.abort(reason: "heartbeat timeout")
        end.tick()
        #expect(try end.sent().isEmpty)
        #expect(end.owner.closes == [CloseInfo(code: 1006, reason: "heartbeat timeout", clean: false, initiator: .network)])
        #expect(!end.channel.isActive)
    }

    @Test("TCP ends without a close frame: 1006 by the network, once", arguments: roles)
    func transportEnds(role: WebSocketRole) throws {
        let end = try End(role)
        try end.channel.close().wait()
        #expect(end.owner.closes == [CloseInfo(code: 1006, reason: "", clean: false, initiator: .network)])
    }

    // MARK: Protocol violations

    struct Violation: Sendable, CustomTestStringConvertible {
        let name: String
        /// The bytes the peer sends, given the peer's role.
        let frames: @Sendable (WebSocketRole) -> [[UInt8]]
        let code: UInt16
        var testDescription: String { self.name }
    }

    static let violations: [Violation] = [
        Violation(name: "message over max_message", frames: { Frame(opcode: .binary, payload: [UInt8](repeating: 1, count: 65)).bytes(maskedBy: $0) }, code: 1009),
        Violation(name: "invalid UTF-8 in a text message", frames: { Frame(opcode: .text, payload: [0x61, 0xC3, 0x28]).bytes(maskedBy: $0) }, code: 1007),
        Violation(name: "invalid UTF-8 across fragments", frames: {
            Frame(opcode: .text, fin: false, payload: [0xF0, 0x9D]).bytes(maskedBy: $0) + Frame(opcode: .continuation, payload: [0x41]).bytes(maskedBy: $0)
        }, code: 1007),
        Violation(name: "invalid UTF-8 in a close reason", frames: { Frame(opcode: .close, payload: [0x03, 0xE8, 0xFF]).bytes(maskedBy: $0) }, code: 1007),
        Violation(name: "close code 1005 on the wire", frames: { Frame(opcode: .close, payload: [0x03, 0xED]).bytes(maskedBy: $0) }, code: 1002),
        Violation(name: "ping of 126 bytes", frames: { Frame(opcode: .ping, payload: [UInt8](repeating: 0, count: 126)).bytes(maskedBy: $0) }, code: 1002),
        Violation(name: "fragmented ping", frames: { Frame(opcode: .ping, fin: false, payload: "x").bytes(maskedBy: $0) }, code: 1002),
        Violation(name: "reserved opcode 3", frames: { peer in
            var bytes = Frame(opcode: .binary, payload: "x").bytes(maskedBy: peer)
            bytes[0][0] = 0x83
            return bytes
        }, code: 1002),
        Violation(name: "continuation without a message", frames: { Frame(opcode: .continuation, payload: "x").bytes(maskedBy: $0) }, code: 1002),
        Violation(name: "RSV1 without permessage-deflate", frames: { Frame(opcode: .text, rsv1: true, payload: "x").bytes(maskedBy: $0) }, code: 1002),
        Violation(name: "the wrong masking for the role", frames: { peer in
            // A client gets a masked frame, a server an unmasked one.
            Frame(opcode: .text, payload: "x").bytes(maskedBy: peer == .client ? .server : .client)
        }, code: 1002),
    ]

    @Test("a violation fails the connection with its code; nothing after it is read", arguments: roles, violations)
    func violation(role: WebSocketRole, violation: Violation) throws {
        let end = try End(role, maxMessage: 64)
        for bytes in violation.frames(end.peer) {
            try end.channel.writeInbound(ByteBuffer(bytes: bytes))
        }
        try end.receive(.text, "after the violation")
        #expect(end.owner.messages.isEmpty)
        #expect(end.owner.failures.map(\.closeCode) == [violation.code])
        let sent = try end.sent()
        #expect(sent.count == 1 && sent.first?.opcode == .close && sent.first?.masked == (role == .client))
        #expect(sent.first?.closeCode == violation.code)
        // The client reads nothing more, not even the server's close frame.
        end.expectTCPEndsByRole()
        #expect(end.owner.closes.map(\.code) == [violation.code])
        #expect(end.owner.closes.first?.clean == false && end.owner.closes.first?.initiator == .local)
    }

    @Test("close and ping are checked in one place, in the core's words")
    func controlChecks() throws {
        for code in [1000, 1001, 1003, 1007, 1014, 3000, 4999] {
            #expect(try WebSocketClose(code: code, reason: "").code == UInt16(code))
        }
        for code in [-1, 0, 999, 1004, 1005, 1006, 1015, 2999, 5000, 65536 + 1000] {
            #expect(throws: WebSocketControlError.invalidCloseCode(code)) { try WebSocketClose(code: code, reason: "") }
        }
        #expect(WebSocketControlError.invalidCloseCode(1005).description == "invalid close code 1005: use 1000 or 3000-4999")
        _ = try WebSocketClose(code: 1000, reason: String(repeating: "é", count: 61) + "x")
        #expect(throws: WebSocketControlError.closeReasonTooLong) {
            try WebSocketClose(code: 1000, reason: String(repeating: "é", count: 62))
        }
        #expect(WebSocketControlError.closeReasonTooLong.description == "close reason longer than 123 bytes")
        #expect(throws: WebSocketControlError.pingTooLong) { try WebSocketPing(ByteBuffer(repeating: 0, count: 126)) }
        #expect(WebSocketControlError.pingTooLong.description == "ping payload longer than 125 bytes")
    }
}

// MARK: - Support

/// One handler on an embedded channel, with the owner that records what it reports.
private final class End {
    static let closeTimeout = TimeAmount.seconds(5)
    let role: WebSocketRole
    let channel = EmbeddedChannel()
    let owner = RecordingOwner()
    let handler: WebSocketHandler<RecordingOwner>

    init(_ role: WebSocketRole, maxMessage: Int = 1 << 20, deflate: PerMessageDeflate? = nil, fragmentSize: Int? = nil) throws {
        self.role = role
        self.handler = WebSocketHandler(
            role: role, owner: self.owner, maxMessage: maxMessage, deflate: deflate,
            closeTimeout: Self.closeTimeout, fragmentSize: fragmentSize
        )
        try self.channel.pipeline.syncOperations.addHandler(self.handler)
        try self.channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
    }

    /// The peer sends `frame`, masked when the peer is a client.
    func receive(_ frame: Frame) throws {
        for bytes in frame.bytes(maskedBy: self.peer) {
            try self.channel.writeInbound(ByteBuffer(bytes: bytes))
        }
    }

    func receive(_ opcode: WebSocketFrameOpcode, _ text: String) throws {
        try self.receive(Frame(opcode: opcode, payload: text))
    }

    /// The role of the other end.
    var peer: WebSocketRole { self.role == .client ? .server : .client }

    /// After the close handshake or a failure: a server has ended TCP once its last frame
    /// was out; a client waits for the server to, and drops TCP itself after the close timeout.
    func expectTCPEndsByRole(sourceLocation: SourceLocation = #_sourceLocation) {
        self.tick()
        if self.role == .server {
            #expect(!self.channel.isActive, sourceLocation: sourceLocation)
        } else {
            #expect(self.channel.isActive, sourceLocation: sourceLocation)
            self.channel.embeddedEventLoop.advanceTime(by: Self.closeTimeout)
            #expect(!self.channel.isActive, "the close timer drops TCP", sourceLocation: sourceLocation)
        }
    }

    /// Runs what the loop has queued: the end-of-tick flush.
    func tick() {
        self.channel.embeddedEventLoop.run()
    }

    /// The buffers flushed to the socket so far.
    func writes() throws -> [ByteBuffer] {
        var out: [ByteBuffer] = []
        while let buffer = try self.channel.readOutbound(as: ByteBuffer.self) { out.append(buffer) }
        return out
    }

    /// The frames flushed so far (empty writes, a server's marker before it ends TCP, skipped).
    func sent() throws -> [Frame] {
        var all = ByteBuffer()
        for var buffer in try self.writes() { all.writeBuffer(&buffer) }
        return try Frame.parse(all)
    }
}

private final class RecordingOwner: ChannelOwner {
    struct Message: Equatable {
        var kind: MessageKind
        var text: String
    }

    var messages: [Message] = []
    var pings = 0
    var pongs: [String] = []
    var failures: [ConnectionError] = []
    var closes: [CloseInfo] = []

    func handlerReceived(_ message: ByteBuffer, kind: MessageKind) {
        self.messages.append(Message(kind: kind, text: String(buffer: message)))
    }

    func handlerReceivedPing() { self.pings += 1 }
    func handlerReceivedPong(_ payload: ByteBuffer) { self.pongs.append(String(buffer: payload)) }
    func handlerFailed(_ error: ConnectionError) { self.failures.append(error) }
    func handlerClosed(_ info: CloseInfo) { self.closes.append(info) }
}

/// A frame as bytes on the wire, built and parsed here (not by the code under test).
struct Frame: Equatable, CustomStringConvertible {
    var opcode: WebSocketFrameOpcode
    var fin = true
    var rsv1 = false
    var payload: [UInt8]
    /// Whether it came with a mask key (only compared for frames the handler wrote).
    var masked = false

    init(opcode: WebSocketFrameOpcode, fin: Bool = true, rsv1: Bool = false, payload: [UInt8], masked: Bool = false) {
        (self.opcode, self.fin, self.rsv1, self.payload, self.masked) = (opcode, fin, rsv1, payload, masked)
    }

    init(opcode: WebSocketFrameOpcode, fin: Bool = true, rsv1: Bool = false, payload: String, masked: Bool = false) {
        self.init(opcode: opcode, fin: fin, rsv1: rsv1, payload: Array(payload.utf8), masked: masked)
    }

    init(close code: UInt16, _ reason: String, masked: Bool = false) {
        self.init(opcode: .close, payload: [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8), masked: masked)
    }

    var text: String { String(decoding: self.payload, as: UTF8.self) }
    var closeCode: UInt16? { self.payload.count >= 2 ? UInt16(self.payload[0]) << 8 | UInt16(self.payload[1]) : nil }
    var description: String { "\(self.opcode) fin=\(self.fin) rsv1=\(self.rsv1) masked=\(self.masked) \(self.payload.count) bytes" }

    /// The frame as `sender` would put it on the wire: a client masks (with a fixed,
    /// non-zero key), a server does not.
    func bytes(maskedBy sender: WebSocketRole) -> [[UInt8]] {
        let key: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        let masked = sender == .client
        var out: [UInt8] = [(self.fin ? 0x80 : 0) | (self.rsv1 ? 0x40 : 0) | self.opcode.rawValue]
        let maskBit: UInt8 = masked ? 0x80 : 0
        let n = self.payload.count
        if n < 126 {
            out.append(maskBit | UInt8(n))
        } else if n <= 0xFFFF {
            out += [maskBit | 126, UInt8(n >> 8), UInt8(n & 0xFF)]
        } else {
            out.append(maskBit | 127)
            out += (0..<8).reversed().map { UInt8((UInt64(n) >> (8 * UInt64($0))) & 0xFF) }
        }
        if masked {
            out += key
            out += self.payload.enumerated().map { $0.element ^ key[$0.offset & 3] }
        } else {
            out += self.payload
        }
        return [out]
    }

    struct Malformed: Error {}

    /// Every whole frame in `buffer`; throws on a partial one.
    static func parse(_ buffer: ByteBuffer) throws -> [Frame] {
        var buffer = buffer
        var frames: [Frame] = []
        while buffer.readableBytes > 0 {
            guard let b0 = buffer.readInteger(as: UInt8.self), let b1 = buffer.readInteger(as: UInt8.self),
                let opcode = WebSocketFrameOpcode(rawValue: b0 & 0x0F)
            else { throw Malformed() }
            var length = Int(b1 & 0x7F)
            if length == 126 {
                guard let n = buffer.readInteger(as: UInt16.self) else { throw Malformed() }
                length = Int(n)
            } else if length == 127 {
                guard let n = buffer.readInteger(as: UInt64.self) else { throw Malformed() }
                length = Int(n)
            }
            let masked = b1 & 0x80 != 0
            let key = masked ? buffer.readBytes(length: 4) : nil
            guard var payload = buffer.readBytes(length: length) else { throw Malformed() }
            if let key {
                payload = payload.enumerated().map { $0.element ^ key[$0.offset & 3] }
            }
            frames.append(Frame(opcode: opcode, fin: b0 & 0x80 != 0, rsv1: b0 & 0x40 != 0, payload: payload, masked: masked))
        }
        return frames
    }
}
