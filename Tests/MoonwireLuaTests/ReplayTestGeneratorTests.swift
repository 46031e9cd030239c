import Testing

@testable import MoonwireLua

@Suite(.timeLimit(.minutes(5))) struct ReplayTestGeneratorTests {
    @Test func generatedLuaStringsRoundTrip() {
        #expect(ReplayTestGenerator.quoted(Array(#"{"a":"b"}"#.utf8)) == #"[[{"a":"b"}]]"#)
        #expect(ReplayTestGenerator.quoted(Array("plain".utf8)) == #""plain""#)
        #expect(ReplayTestGenerator.quoted(Array("a]]\"b\n".utf8)) == #""a]]\"b\n""#)
        #expect(ReplayTestGenerator.quoted([0, 0x41, 0xff]) == #""\x00A\xFF""#)
    }
}
