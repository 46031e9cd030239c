import Testing
import MoonwireCore

@testable import moonwire

/// The pure pieces of `connect` and `listen`: input lines, hexdumps, JSON, flag values.
@Suite(.timeLimit(.minutes(5))) struct SessionTextTests {
    @Test(arguments: [
        ("hello", SessionInput.message("hello")),
        ("//etc/passwd", .message("/etc/passwd")),
        ("/close 4000 bye now", .command("close", "4000 bye now")),
        ("/PING", .command("ping", "")),
        ("/binary   01 ff", .command("binary", "01 ff")),
        ("/", .command("", "")),
    ])
    func inputLines(line: String, expected: SessionInput) {
        #expect(SessionInput(line) == expected)
    }

    @Test func closeArguments() {
        #expect(SessionInput.closeArguments("")! == (1000, ""))
        #expect(SessionInput.closeArguments("4000 bye now")! == (4000, "bye now"))
        #expect(SessionInput.closeArguments("soon") == nil)
    }

    @Test func hexdumpHasOffsetsHexAndText() {
        let lines = MessageText.hexdump(Array(0..<20))
        #expect(lines == [
            "00000000  00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f  |................|",
            "00000010  10 11 12 13                                       |....|",
        ])
        let short = MessageText.hexdump(Array("hello".utf8))
        #expect(short == ["00000000  68 65 6c 6c 6f                                    |hello|"])
    }

    @Test func hexdumpStopsAtItsLimit() {
        let lines = MessageText.hexdump([UInt8](repeating: 0x41, count: MessageText.hexdumpLimit + 5))
        #expect(lines.count == MessageText.hexdumpLimit / 16 + 1)
        #expect(lines.last == "... 5 more bytes")
    }

    @Test func prettyJSONKeepsKeyOrderAndStrings() {
        #expect(MessageText.prettyJSON(Array(#"{"z":1,"a":[2,{}],"s":"x, {y}: \"q\""}"#.utf8)) == """
            {
              "z": 1,
              "a": [
                2,
                {}
              ],
              "s": "x, {y}: \\"q\\""
            }
            """)
        #expect(MessageText.prettyJSON(Array("not json".utf8)) == nil)
        #expect(MessageText.prettyJSON(Array("42".utf8)) == nil)
        #expect(MessageText.prettyJSON(Array("{broken".utf8)) == nil)
    }

    @Test func prettyJSONIsExactAndSafe() {
        // Numbers keep their text (a 64-bit id, a number past 64 bits, exponents).
        #expect(MessageText.prettyJSON(Array(#"[9007199254740993,123456789012345678901234,1e2,-0.0]"#.utf8)) == """
            [
              9007199254740993,
              123456789012345678901234,
              1e2,
              -0.0
            ]
            """)
        // A control character from the peer comes out escaped, not raw.
        #expect(MessageText.prettyJSON(Array("{\"m\":\"a\\u001b[2Jb\"}".utf8)) == #"{\#n  "m": "a\u001B[2Jb"\#n}"#)
        // Invalid UTF-8, text after the value, and nesting past 500 are shown as they came.
        #expect(MessageText.prettyJSON([0x5b, 0x22, 0xff, 0x22, 0x5d]) == nil)
        #expect(MessageText.prettyJSON(Array("{} {}".utf8)) == nil)
        #expect(MessageText.prettyJSON(Array((String(repeating: "[", count: 501) + String(repeating: "]", count: 501)).utf8)) == nil)
        #expect(MessageText.prettyJSON(Array((String(repeating: "[", count: 500) + String(repeating: "]", count: 500)).utf8)) != nil)
    }

    @Test func controlCharactersAreShownNotObeyed() {
        #expect(TerminalText.printable("a\u{1b}[2Jb\tc\nd") == "a\\u{1b}[2Jb\tc\nd")
        #expect(MessageText.looksLikeText(Array("héllo\n".utf8)))
        #expect(!MessageText.looksLikeText([0x00, 0x41]))
        #expect(!MessageText.looksLikeText([0xff, 0xfe]))
    }

    @Test func closeLinesNameTheCode() {
        #expect(MessageText.describeClose(code: 1007, reason: "bad utf-8") == #"1007 (invalid payload data) "bad utf-8""#)
        #expect(MessageText.describeClose(code: 4001, reason: "") == "4001")
    }

    @Test func flagValues() throws {
        #expect(try ArgumentValues.size("64K", flag: "--max-message") == 65536)
        #expect(try ArgumentValues.size("2m", flag: "--max-message") == 2 << 20)
        #expect(throws: (any Error).self) { try ArgumentValues.size("lots", flag: "--max-message") }
        #expect(try ArgumentValues.framing("length:2", max: 100).description == "length 2 big")
        #expect(try ArgumentValues.framing("crlf", max: 100).description == #"delimiter "\r\n""#)
        #expect(throws: (any Error).self) { try ArgumentValues.framing("length:3", max: 100) }
        #expect(throws: (any Error).self) { try ArgumentValues.framing("lines", max: 100) }
    }
}

/// docs/cli.md and the man page name every flag `connect` and `listen` show in --help.
@Suite(.timeLimit(.minutes(5))) struct SessionDocsTests {
    @Test(arguments: ["connect", "listen"])
    func everyFlagIsDocumented(command: String) throws {
        let help = try CommandRunner.run(command, "--help")
        #expect(help.status == 0)
        let flags = Set(help.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," })
            .filter { $0.hasPrefix("--") && $0.count > 2 }.map(String.init))
        #expect(flags.count > 10)
        let docs = CommandRunner.packageRoot.appendingPathComponent("docs")
        let guide = try String(contentsOf: docs.appendingPathComponent("cli.md"), encoding: .utf8)
        let manual = try String(contentsOf: docs.appendingPathComponent("moonwire.1"), encoding: .utf8)
            .replacingOccurrences(of: "\\-", with: "-")
        for flag in flags where flag != "--help" && flag != "--version" {
            #expect(guide.contains(flag), "docs/cli.md does not mention \(command) \(flag)")
            #expect(manual.contains(flag), "docs/moonwire.1 does not mention \(command) \(flag)")
        }
    }
}
