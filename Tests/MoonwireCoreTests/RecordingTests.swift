import Foundation
import NIOCore
import Testing

@testable import MoonwireCore

@Suite(.timeLimit(.minutes(5))) struct RecordingTests {
    func temp(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("mw-recording-\(getpid())-\(UUID().uuidString.prefix(6))-\(name)").path
    }

    func message(_ text: String, out: Bool = false) -> RecordedMessage {
        RecordedMessage(time: 0, outgoing: out, kind: .text, data: Array(text.utf8))
    }

    @Test func writesAndReadsBackAConversation() throws {
        let path = temp("a.jsonl")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let session = try SessionRecorder(path: path, toolVersion: "9.9", url: "ws://h/?token=abc&room=1", headers: [("Authorization", "Bearer x"), ("X-Trace", "1")])
        let c = session.connection(url: "ws://h/?token=abc&room=1", headers: [("Cookie", "s=1")])
        c.opened(subprotocol: "chat", extensions: nil, reconnects: 0)
        c.message(ByteBuffer(string: "hello \"you\"\n"), kind: .text, outgoing: false)
        c.message(ByteBuffer(string: "login"), kind: .text, outgoing: true)
        c.message(ByteBuffer(bytes: [0, 1, 0xff]), kind: .binary, outgoing: false)
        c.message(ByteBuffer(bytes: [0xc3, 0x28]), kind: .text, outgoing: false)
        c.closed(code: 4000, reason: "bye", by: "peer", clean: true, willReconnect: false)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!text.contains("Bearer x") && !text.contains("abc") && !text.contains("s=1"))
        #expect(text.contains("token=REDACTED&room=1"))
        #expect(text.contains(#""encoding":"base64""#))

        let read = try RecordingReader.conversation(path: path)
        #expect(read.subprotocol == "chat")
        #expect(read.exchanges.count == 2)
        #expect(read.exchanges[0].sent == nil)
        #expect(read.exchanges[0].replies.map(\.data) == [Array("hello \"you\"\n".utf8)])
        #expect(read.exchanges[1].sent?.data == Array("login".utf8))
        #expect(read.exchanges[1].replies.map(\.data) == [[0, 1, 0xff], [0xc3, 0x28]])
        #expect(read.exchanges[1].replies.map(\.kind) == [.binary, .text])
        #expect(read.serverClose?.code == 4000)
    }

    @Test func badLinesNameFileAndLine() throws {
        let path = temp("bad.jsonl")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "{\"moonwire_recording\":1}\n{\"t\":1,\"c\":1,\"event\":\"message\",\"dir\":\"up\",\"kind\":\"text\",\"data\":\"x\"}\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: RecordingError.self) { try RecordingReader.conversation(path: path) }
        do {
            _ = try RecordingReader.conversation(path: path)
        } catch {
            #expect(error.description == "\(path):2: a message needs \"dir\": \"in\" or \"out\"")
        }
    }

    @Test func matcherComparesJSONValuesWithIgnoreAndLoose() {
        let exact = MessageMatcher(ignore: ["id", "meta.ts"])
        let expected = message(#"{"op":"hi","id":1,"meta":{"ts":5,"n":1},"list":[{"id":3,"v":1}]}"#)
        #expect(exact.difference(expected: expected, actual: Array(#"{"list":[{"v":1,"id":9}],"meta":{"n":1,"ts":6},"id":2,"op":"hi"}"#.utf8), kind: .text) == nil)
        #expect(exact.difference(expected: expected, actual: Array(#"{"op":"ho","meta":{"n":1},"list":[{"v":1}],"x":true}"#.utf8), kind: .text)
            == "$.op: expected \"hi\", got \"ho\"\n$.x: not expected, got true")
        let loose = MessageMatcher(loose: true)
        #expect(loose.difference(expected: message(#"{"a":1}"#), actual: Array(#"{"a":1,"b":2}"#.utf8), kind: .text) == nil)
        #expect(loose.difference(expected: message(#"{"a":true}"#), actual: Array(#"{"a":1}"#.utf8), kind: .text) == "$.a: expected true, got 1")
        #expect(exact.difference(expected: message("plain"), actual: Array("plain!".utf8), kind: .text) == "expected \"plain\"\n     got \"plain!\"")
        #expect(exact.difference(expected: message("x"), actual: Array("x".utf8), kind: .binary)?.hasPrefix("expected a text message, got a binary one") == true)
    }

    /// With a binary format, binary messages are compared as the values they decode to
    /// (here the bytes after a 0xFF header are JSON), by the same rules; one that
    /// does not decode must be the same bytes; a difference shows the format's text.
    @Test func matcherComparesBinaryMessagesAsDecodedValues() {
        var matcher = MessageMatcher(ignore: ["id"])
        matcher.binaryFormat = MessageMatcher.BinaryFormat(
            json: { bytes in bytes.first == 0xFF ? Array(bytes.dropFirst()) : nil },
            text: { bytes in bytes.first == 0xFF ? "decoded " + String(decoding: bytes.dropFirst(), as: UTF8.self) : "undecodable \(bytes.count) bytes" }
        )
        func binary(_ json: String) -> [UInt8] { [0xFF] + Array(json.utf8) }
        let expected = RecordedMessage(time: 0, outgoing: true, kind: .binary, data: binary(#"{"op":"hi","id":1,"n":[1,2]}"#))
        #expect(matcher.difference(expected: expected, actual: binary(#"{"n": [1, 2], "id": 7, "op": "hi"}"#), kind: .binary) == nil)
        #expect(matcher.difference(expected: expected, actual: binary(#"{"n":[1,3],"op":"hi"}"#), kind: .binary) == "$.n[1]: expected 2, got 3")
        #expect(matcher.difference(expected: expected, actual: [0x02, 0x7B], kind: .binary)
            == "expected decoded {\"op\":\"hi\",\"id\":1,\"n\":[1,2]}\n     got undecodable 2 bytes")
        #expect(matcher.shown(binary("1"), kind: .binary) == "decoded 1")
        #expect(matcher.shown(Array("1".utf8), kind: .text) == "\"1\"")
        // Without a format: the same bytes, or base64 in the difference.
        #expect(MessageMatcher().difference(expected: expected, actual: binary(#"{"n": [1, 2], "id": 1, "op": "hi"}"#), kind: .binary)?.contains("got base64:") == true)
    }

    /// --ignore paths with array positions: OCPP's message id at [1], a position inside
    /// an object, any position, any depth; a bare name and a dotted path as before.
    @Test func ignorePathsNameArrayPositions() throws {
        let call = message(#"[2,"a1","Heartbeat",{"ids":[{"id":1,"v":2}],"ts":5}]"#)
        func differs(_ ignore: [String], _ actual: String) -> String? {
            MessageMatcher(ignore: ignore).difference(expected: call, actual: Array(actual.utf8), kind: .text)
        }
        let fresh = #"[2,"b7","Heartbeat",{"ids":[{"id":9,"v":2}],"ts":6}]"#
        #expect(differs([], fresh) == "$[1]: expected \"a1\", got \"b7\"\n$[3].ids[0].id: expected 1, got 9\n$[3].ts: expected 5, got 6")
        #expect(differs(["[1]", "$[3].ids[0].id", "ts"], fresh) == nil)
        #expect(differs(["*[1]", "[3].ids[*].id", "[3].ts"], fresh) == nil)
        #expect(differs(["[2]", "id", "ts"], fresh) == "$[1]: expected \"a1\", got \"b7\"")
        // A path without positions passes over the arrays on its way, as it always did.
        #expect(differs(["ids.id", "[1]", "ts"], fresh) == nil)
        #expect(differs(["v.id", "[1]", "ts"], fresh) == "$[3].ids[0].id: expected 1, got 9")
        #expect(try IgnorePath("$.a[0].id").matches([.key("a"), .index(0), .key("id")]))
        #expect(try !IgnorePath("$.a[0].id").matches([.key("a"), .index(1), .key("id")]))
        #expect(try IgnorePath("user.id").matches([.key("user"), .index(3), .key("id")]))
        #expect(try IgnorePath("*.user.id").matches([.index(0), .key("user"), .key("id")]))
        for bad in ["[x]", "a[", "a..b", "$", "[-1]", "a.[1]"] {
            #expect(throws: IgnorePath.SyntaxError.self, "\(bad)") { try IgnorePath(bad) }
        }
    }

    /// auto_reply's exact rules: the whole message, byte for byte; the answer keeps the
    /// probe's kind unless it is not UTF-8.
    @Test func autoReplyMatchesWholeMessagesOnly() {
        let rules = AutoReply([.init(match: Array("2".utf8), reply: Array("3".utf8)), .init(match: [0x09], reply: [0xff])])
        let answer = rules.answer(to: ByteBuffer(string: "2"), kind: .text)
        #expect(answer.map { String(buffer: $0.0) } == "3")
        #expect(answer?.1 == .text)
        #expect(rules.answer(to: ByteBuffer(string: "20"), kind: .text) == nil)
        #expect(rules.answer(to: ByteBuffer(string: ""), kind: .text) == nil)
        #expect(rules.answer(to: ByteBuffer(bytes: [0x09]), kind: .text)?.1 == .binary)
    }
}
