import Foundation
import NIOCore
import Testing

@testable import MoonwireCore

@Suite("WebSocket pure parts", .timeLimit(.minutes(5)))
struct WebSocketUnitTests {
    // MARK: UTF-8

    @Test("UTF-8 validator accepts valid text in any split")
    func utf8ValidSplits() {
        let text = Array("héllo κόσμε ✓ 𝄞 end, and some more ASCII to pass a word".utf8)
        for cut in 0...text.count {
            var v = UTF8Validator()
            let a = text[..<cut].withUnsafeBytes { v.feed($0) }
            let b = text[cut...].withUnsafeBytes { v.feed($0) }
            #expect(a && b && v.isComplete, "cut at \(cut)")
        }
    }

    @Test(
        "UTF-8 validator rejects at the first bad byte",
        arguments: [
            [0xFF] as [UInt8],  // never valid
            [0xC0, 0x80],  // overlong
            [0xE0, 0x80, 0x80],  // overlong 3-byte
            [0xED, 0xA0, 0x80],  // surrogate
            [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
            [0xF5],
            [0xCE, 0x41],  // truncated sequence followed by ASCII
        ]
    )
    func utf8Invalid(bytes: [UInt8]) {
        var v = UTF8Validator()
        #expect(!bytes.withUnsafeBytes { v.feed($0) })
    }

    @Test("UTF-8 validator: a character that is not ASCII, or a bad byte, at every position of a word and a block")
    func utf8EveryPosition() {
        for at in 0..<70 {
            var text = Array(repeating: UInt8(ascii: "a"), count: 70)
            text.insert(contentsOf: Array("é✓".utf8), at: at)
            var v = UTF8Validator()
            #expect(text.withUnsafeBytes { v.feed($0) } && v.isComplete, "é✓ at \(at)")
            var bad = Array(repeating: UInt8(ascii: "a"), count: 70)
            bad[at] = 0xFF
            var w = UTF8Validator()
            #expect(!bad.withUnsafeBytes { w.feed($0) }, "0xFF at \(at)")
        }
    }

    @Test("UTF-8 validator fails fast: the bad byte is refused before the message ends")
    func utf8FailFast() {
        var v = UTF8Validator()
        let first = v.feed(ByteBuffer(bytes: Array("κόσμε".utf8) + [0xE2, 0x82]))
        #expect(first && !v.isComplete)
        let second = v.feed(ByteBuffer(bytes: [0x28]))
        #expect(!second)
    }

    // MARK: Close codes and close handshake

    @Test("close codes allowed on the wire")
    func closeCodes() {
        for code: UInt16 in [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 3000, 3999, 4000, 4999] {
            #expect(CloseCode.isValidOnWire(code), "\(code)")
        }
        for code: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535] {
            #expect(!CloseCode.isValidOnWire(code), "\(code)")
        }
    }

    @Test("close payloads: empty, 1 byte, bad code, bad UTF-8 reason")
    func closePayloads() throws {
        #expect(try WebSocketMessageAssembler.parseClose(ByteBuffer()) == .close(code: nil, reason: ""))
        var ok = ByteBuffer()
        ok.writeInteger(UInt16(4001))
        ok.writeString("bye")
        #expect(try WebSocketMessageAssembler.parseClose(ok) == .close(code: 4001, reason: "bye"))
        #expect(throws: WebSocketProtocolViolation.protocolError("close frame with a 1-byte payload")) {
            try WebSocketMessageAssembler.parseClose(ByteBuffer(bytes: [0x03]))
        }
        #expect(throws: WebSocketProtocolViolation.protocolError("invalid close code 1005")) {
            try WebSocketMessageAssembler.parseClose(ByteBuffer(bytes: [0x03, 0xED]))
        }
        #expect(throws: WebSocketProtocolViolation.invalidPayload("invalid UTF-8 in close reason")) {
            try WebSocketMessageAssembler.parseClose(ByteBuffer(bytes: [0x03, 0xE8, 0xFF]))
        }
    }

    @Test("close handshake we start: report once, with the peer's code")
    func closeLocal() {
        var m = WebSocketCloseStateMachine()
        #expect(m.closeRequested(code: 1000, reason: "bye") == .sendClose(code: 1000, reason: "bye"))
        #expect(m.closeRequested(code: 1000, reason: "again") == .none)
        #expect(m.peerClosed(code: 1000, reason: "ok") == .report(CloseInfo(code: 1000, reason: "ok", clean: true, initiator: .local)))
        #expect(m.transportClosed() == nil)
        #expect(m.closeTimedOut() == .none)
    }

    @Test("close handshake the peer starts: echo its code")
    func closePeer() {
        var m = WebSocketCloseStateMachine()
        let info = CloseInfo(code: 4001, reason: "go", clean: true, initiator: .peer)
        #expect(m.peerClosed(code: 4001, reason: "go") == .echoClose(code: 4001, reason: "go", info: info))
        #expect(m.transportClosed() == nil)
        var empty = WebSocketCloseStateMachine()
        let noStatus = CloseInfo(code: 1005, reason: "", clean: true, initiator: .peer)
        #expect(empty.peerClosed(code: nil, reason: "") == .echoClose(code: nil, reason: "", info: noStatus))
    }

    @Test("our close unanswered: dropped after the timeout as 1006")
    func closeTimeout() {
        var m = WebSocketCloseStateMachine()
        _ = m.closeRequested(code: 1000, reason: "")
        #expect(m.closeTimedOut() == .drop(CloseInfo(code: 1006, reason: "", clean: false, initiator: .local)))
        #expect(m.transportClosed() == nil)
    }

    @Test("protocol violation: one close frame, reported with our code, once")
    func closeViolation() {
        var m = WebSocketCloseStateMachine()
        let v = WebSocketProtocolViolation.protocolError("masked frame from server")
        #expect(m.protocolViolation(v) == .sendClose(code: 1002, reason: "masked frame from server"))
        let info = CloseInfo(code: 1002, reason: "masked frame from server", clean: false, initiator: .local)
        #expect(m.transportClosed() == info)
        #expect(m.transportClosed() == nil)
        #expect(m.protocolViolation(v) == .none)
    }

    @Test("transport lost while open: 1006 by network")
    func closeNetwork() {
        var m = WebSocketCloseStateMachine()
        #expect(m.transportClosed() == CloseInfo(code: 1006, reason: "", clean: false, initiator: .network))
    }

    // MARK: Frame parser

    private func parseAll(_ bytes: [UInt8], max: Int = 1 << 20, splitAt: Int? = nil) throws -> [WebSocketFrameParser.Event] {
        var parser = WebSocketFrameParser(maxPayload: max)
        var events: [WebSocketFrameParser.Event] = []
        let parts = splitAt.map { [Array(bytes[..<$0]), Array(bytes[$0...])] } ?? [bytes]
        for part in parts {
            var buffer = ByteBuffer(bytes: part)
            while let event = try parser.next(&buffer) { events.append(event) }
        }
        return events
    }

    @Test("frame parser: header split at every byte gives the same frame")
    func parserSplitHeader() throws {
        let payload = [UInt8](repeating: 0x61, count: 300)
        let frame: [UInt8] = [0x81, 126, 0x01, 0x2C] + payload
        for cut in 1..<6 {
            let events = try parseAll(frame, splitAt: cut)
            guard case .header(let h) = events.first else {
                Issue.record("no header at cut \(cut)")
                continue
            }
            #expect(h.length == 300 && h.fin && h.opcode == .text)
            let body = events.dropFirst().compactMap { e -> [UInt8]? in
                if case .payload(let b, _) = e { return Array(b.readableBytesView) }
                return nil
            }.flatMap { $0 }
            #expect(body == payload)
        }
    }

    @Test("frame parser: a 2^63 length is refused from the header alone")
    func parserHugeLength() {
        #expect(throws: WebSocketProtocolViolation.protocolError("frame length with the most significant bit set")) {
            _ = try parseAll([0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0])
        }
        #expect(throws: WebSocketProtocolViolation.tooBig(1024)) {
            _ = try parseAll([0x82, 127, 0x40, 0, 0, 0, 0, 0, 0, 0], max: 1024)
        }
    }

    @Test("frame parser: per-frame protocol errors")
    func parserErrors() {
        #expect(throws: WebSocketProtocolViolation.protocolError("masked frame from server")) {
            _ = try parseAll([0x81, 0x81, 1, 2, 3, 4, 0x61])
        }
        #expect(throws: WebSocketProtocolViolation.protocolError("unknown opcode 3")) {
            _ = try parseAll([0x83, 0])
        }
        #expect(throws: WebSocketProtocolViolation.protocolError("fragmented control frame")) {
            _ = try parseAll([0x09, 0])
        }
        #expect(throws: WebSocketProtocolViolation.protocolError("control frame longer than 125 bytes")) {
            _ = try parseAll([0x89, 126, 0, 126] + [UInt8](repeating: 0, count: 126))
        }
    }

    /// A client frame: masked with `key`.
    private func maskedFrame(_ b0: UInt8, _ payload: [UInt8], key: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]) -> [UInt8] {
        var header: [UInt8] = [b0]
        if payload.count < 126 {
            header.append(0x80 | UInt8(payload.count))
        } else {
            header += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        return header + key + payload.enumerated().map { $0.element ^ key[$0.offset & 3] }
    }

    private func serverParse(_ bytes: [UInt8], max: Int = 1 << 20, cuts: [Int]) throws -> (WebSocketFrameHeader?, [UInt8]) {
        var parser = WebSocketFrameParser(maxPayload: max, role: .server)
        var header: WebSocketFrameHeader?
        var body: [UInt8] = []
        var start = 0
        for end in cuts + [bytes.count] where end >= start {
            var buffer = ByteBuffer(bytes: bytes[start..<end])
            start = end
            while let event = try parser.next(&buffer) {
                switch event {
                case .header(let h): header = h
                case .payload(let chunk, _): body += chunk.readableBytesView
                }
            }
        }
        return (header, body)
    }

    @Test("frame parser, server role: masked payload unmasked across any split of header, key and payload")
    func serverParserUnmasksAcrossSplits() throws {
        let payload = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let frame = maskedFrame(0x82, payload)
        for a in 1..<frame.count where a < 12 || a % 37 == 0 {
            for b in [a + 1, a + 3, a + 5, frame.count - 1] where b < frame.count {
                let (header, body) = try serverParse(frame, cuts: [a, b])
                #expect(header?.length == 300 && header?.opcode == .binary)
                #expect(body == payload, "cuts \(a), \(b)")
            }
        }
    }

    @Test("frame parser, server role: unmasked client frames are refused; client role refuses masked ones")
    func serverParserRequiresMask() {
        #expect(throws: WebSocketProtocolViolation.protocolError("unmasked frame from client")) {
            _ = try serverParse([0x81, 0x01, 0x61], cuts: [])
        }
        #expect(throws: WebSocketProtocolViolation.protocolError("masked frame from server")) {
            _ = try parseAll(maskedFrame(0x81, [0x61]))
        }
        #expect(throws: WebSocketProtocolViolation.protocolError("frame length with the most significant bit set")) {
            _ = try serverParse([0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4], cuts: [])
        }
    }

    @Test("assembler, server role: invalid UTF-8 in a fragmented text message fails before the message ends")
    func serverAssemblerFailsFast() throws {
        var parser = WebSocketFrameParser(maxPayload: 1 << 20, role: .server)
        var assembler = WebSocketMessageAssembler(maxMessage: 1 << 20, deflate: nil)
        // First fragment fine, second carries 0xFF; the final fragment never comes.
        var buffer = ByteBuffer(bytes: maskedFrame(0x01, Array("hé".utf8)) + maskedFrame(0x00, [0x61, 0xFF]))
        #expect(throws: WebSocketProtocolViolation.invalidPayload("invalid UTF-8 in text message")) {
            while let event = try parser.next(&buffer) { _ = try assembler.handle(event) }
        }
    }

    // MARK: Message assembly

    private func assemble(_ bytes: [UInt8], max: Int = 1 << 20, deflate: PerMessageDeflate? = nil) throws -> [WebSocketMessageAssembler.Action] {
        var parser = WebSocketFrameParser(maxPayload: max)
        var assembler = WebSocketMessageAssembler(maxMessage: max, deflate: deflate)
        var buffer = ByteBuffer(bytes: bytes)
        var actions: [WebSocketMessageAssembler.Action] = []
        while let event = try parser.next(&buffer) {
            let action = try assembler.handle(event)
            if action != .none { actions.append(action) }
        }
        return actions
    }

    @Test("assembler: fragments with an interleaved ping make one message")
    func assemblerFragments() throws {
        let actions = try assemble([0x01, 2, 0x68, 0x65, 0x89, 1, 0x70, 0x80, 3, 0x6C, 0x6C, 0x6F])
        #expect(actions == [.ping(ByteBuffer(string: "p")), .message(ByteBuffer(string: "hello"), .text)])
    }

    @Test("assembler: bad continuation sequences and reserved bits are 1002")
    func assemblerSequence() {
        #expect(throws: WebSocketProtocolViolation.self) { _ = try assemble([0x80, 0]) }  // continuation alone
        #expect(throws: WebSocketProtocolViolation.self) { _ = try assemble([0x01, 0, 0x81, 0]) }  // new text mid-message
        #expect(throws: WebSocketProtocolViolation.self) { _ = try assemble([0xC1, 0]) }  // RSV1 without deflate
        #expect(throws: WebSocketProtocolViolation.self) { _ = try assemble([0xA1, 0]) }  // RSV2
    }

    @Test("assembler: invalid UTF-8 in a later fragment fails before the message ends")
    func assemblerUTF8FailFast() {
        #expect(throws: WebSocketProtocolViolation.invalidPayload("invalid UTF-8 in text message")) {
            _ = try assemble([0x01, 2, 0x68, 0x69, 0x00, 1, 0xFF])  // no final fragment needed
        }
    }

    @Test("assembler: max_message counts all fragments")
    func assemblerMaxMessage() {
        #expect(throws: WebSocketProtocolViolation.tooBig(4)) {
            _ = try assemble([0x02, 3, 1, 2, 3, 0x80, 2, 4, 5], max: 4)
        }
    }

    @Test("assembler: compressed message round trip and decompression bounded by max_message")
    func assemblerDeflate() throws {
        let text = String(repeating: "moonwire ", count: 200)
        let sender = try PerMessageDeflate(parameters: PerMessageDeflateParameters())
        let compressed = try sender.deflate(ByteBuffer(string: text), isFinal: true, headroom: 0, allocator: ByteBufferAllocator())
        let payload = Array(compressed.readableBytesView)
        let frame: [UInt8] = [0xC1, 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
        let receiver = try PerMessageDeflate(parameters: PerMessageDeflateParameters())
        #expect(try assemble(frame, deflate: receiver) == [.message(ByteBuffer(string: text), .text)])
        let small = try PerMessageDeflate(parameters: PerMessageDeflateParameters())
        #expect(throws: WebSocketProtocolViolation.tooBig(1000)) {
            _ = try assemble(frame, max: 1000, deflate: small)
        }
    }

    @Test("an 8-bit client window (which zlib cannot produce) means sending uncompressed")
    func deflateWindow8() throws {
        var parameters = PerMessageDeflateParameters()
        parameters.clientMaxWindowBits = 8
        #expect(try !PerMessageDeflate(parameters: parameters).canCompress)
        #expect(try PerMessageDeflate(parameters: PerMessageDeflateParameters()).shouldCompress(1000))
    }

    // MARK: permessage-deflate negotiation

    @Test("deflate negotiation: accepted parameters")
    func deflateAccept() throws {
        let offer = PerMessageDeflateOffer()
        #expect(offer.headerValue == "permessage-deflate; client_max_window_bits")
        #expect(try offer.accept([]) == nil)
        let agreed = try #require(
            try offer.accept(["permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=9"])
        )
        #expect(agreed.serverNoContextTakeover && agreed.clientNoContextTakeover)
        #expect(agreed.serverMaxWindowBits == 10 && agreed.clientMaxWindowBits == 9)
    }

    @Test(
        "deflate negotiation: responses a server must not send",
        arguments: [
            "x-webkit-deflate-frame",
            "permessage-deflate, permessage-deflate",
            "permessage-deflate; server_max_window_bits=7",
            "permessage-deflate; server_max_window_bits=010",
            "permessage-deflate; server_max_window_bits",
            "permessage-deflate; client_no_context_takeover=1",
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
            "permessage-deflate; foo=1",
        ]
    )
    func deflateRefuse(response: String) {
        #expect(throws: ConnectionError.self) { _ = try PerMessageDeflateOffer().accept([response]) }
    }

    @Test("deflate negotiation: client_max_window_bits only if offered, within the offer")
    func deflateClientWindow() {
        let none = PerMessageDeflateOffer(clientMaxWindowBits: nil)
        #expect(throws: ConnectionError.self) { _ = try none.accept(["permessage-deflate; client_max_window_bits=10"]) }
        let limited = PerMessageDeflateOffer(serverNoContextTakeover: true, serverMaxWindowBits: 10, clientMaxWindowBits: 12)
        #expect(limited.headerValue == "permessage-deflate; server_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12")
        #expect(throws: ConnectionError.self) { _ = try limited.accept(["permessage-deflate; server_no_context_takeover; client_max_window_bits=13"]) }
        #expect(throws: ConnectionError.self) { _ = try limited.accept(["permessage-deflate; server_no_context_takeover; server_max_window_bits=11"]) }
        #expect(throws: ConnectionError.self) { _ = try limited.accept(["permessage-deflate"]) }  // ignored server_no_context_takeover
    }

    // MARK: URLs, masking, digests

    @Test("URL parsing")
    func urls() throws {
        let a = try WebSocketURL("ws://example.com/chat?x=1")
        #expect(a.host == "example.com" && a.port == 80 && a.requestTarget == "/chat?x=1" && !a.secure)
        #expect(a.hostHeader == "example.com")
        let b = try WebSocketURL("WSS://[::1]:8443")
        #expect(b.host == "::1" && b.port == 8443 && b.requestTarget == "/" && b.secure && b.hostIsIPAddress)
        #expect(b.hostHeader == "[::1]:8443")
        #expect(try WebSocketURL("ws://h?q").requestTarget == "/?q")
        for bad in ["http://x/", "ws://", "ws://h:0/", "ws://h:99999/", "ws://@h/", "ws://u:%zz@h/", "ws://h/#f", "ws://[::1/", "ws://::1/"] {
            #expect(throws: WebSocketURL.ParseError.self, "\(bad)") { _ = try WebSocketURL(bad) }
        }
        let secret = try WebSocketURL("ws://ann:s%40cret@h:9/x")
        #expect(secret.credentials == Credentials(user: "ann", password: "s@cret"))
        #expect(secret.description == "ws://h:9/x" && secret.host == "h" && secret.port == 9)
        #expect(try WebSocketURL("ws://u@h/").credentials == Credentials(user: "u", password: ""))
        #expect(try WebSocketURL("ws://h/").credentials == nil)
        #expect(throws: WebSocketURL.ParseError(message: "invalid WebSocket URL 'ws://ann:***@h/#f': fragments are not allowed")) {
            _ = try WebSocketURL("ws://ann:s3cret@h/#f")
        }
    }

    @Test("frame writer masks and unmasks at every length class")
    func writerMasks() {
        var writer = WebSocketFramer(role: .client)
        for length in [0, 1, 7, 125, 126, 65535, 65536, 70001] {
            let payload = ByteBuffer(bytes: (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            var frame = writer.frame(.binary, payload: payload, allocator: ByteBufferAllocator())
            let b0 = frame.readInteger(as: UInt8.self)!
            let b1 = frame.readInteger(as: UInt8.self)!
            #expect(b0 == 0x82 && b1 & 0x80 != 0)
            var len = Int(b1 & 0x7F)
            if len == 126 { len = Int(frame.readInteger(as: UInt16.self)!) }
            if len == 127 { len = Int(frame.readInteger(as: UInt64.self)!) }
            #expect(len == length)
            let key = frame.readBytes(length: 4)!
            let unmasked = frame.readableBytesView.enumerated().map { $0.element ^ key[$0.offset & 3] }
            #expect(unmasked == Array(payload.readableBytesView))
        }
    }
}
