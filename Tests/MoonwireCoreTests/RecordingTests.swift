import Foundation
import NIOCore
import Testing

@testable import MoonwireCore

@Suite struct RecordingTests {
    func temp(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("mw-recording-\(getpid())-\(UUID().uuidString.prefix(6))-\(name)").path
    }

    func message(_ text: String, out: Bool = false) -> RecordedMessage {
        RecordedMessage(time: 0, outgoing: out, kind: .text, data: Array(text.utf8))
    }

    @Test func writesAndReadsBackAConversation() throws {
        let path = temp("a.jsonl")
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

    @Test func generatedLuaStringsRoundTrip() {
        #expect(ReplayTestGenerator.quoted(Array(#"{"a":"b"}"#.utf8)) == #"[[{"a":"b"}]]"#)
        #expect(ReplayTestGenerator.quoted(Array("plain".utf8)) == #""plain""#)
        #expect(ReplayTestGenerator.quoted(Array("a]]\"b\n".utf8)) == #""a]]\"b\n""#)
        #expect(ReplayTestGenerator.quoted([0, 0x41, 0xff]) == #""\x00A\xFF""#)
    }
}
