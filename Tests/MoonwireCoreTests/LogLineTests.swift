import Foundation
import MoonwireCore
import Testing

@Suite(.timeLimit(.minutes(5))) struct LogLineTests {
    let noon = timespec(tv_sec: 1_795_000_000, tv_nsec: 7_000_000)

    @Test func jsonLinesAreParseableAndEscaped() throws {
        let line = LogLine.render(
            level: "info", message: "quote \" tab \t nl \n bell \u{7}", metadata: [("conn", "#1")], format: .json, colors: false, time: noon
        )
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object["message"] == "quote \" tab \t nl \n bell \u{7}")
        #expect(object["conn"] == "#1")
        #expect(object["time"] == "2026-11-18T11:06:40.007Z")
        #expect(!line.contains("\n"))
    }

    @Test func textLinesAreOneLineWithPaddedLevel() {
        let line = LogLine.render(level: "warning", message: "slow", metadata: [("rtt", "0.2")], format: .text, colors: false, time: noon)
        #expect(line.hasSuffix(".007 WARNING slow rtt=0.2"))
        let info = LogLine.render(level: "info", message: "hi", metadata: [], format: .text, colors: true, time: noon)
        #expect(info.contains("\u{1b}[32mINFO \u{1b}[0m hi"))
    }
}
