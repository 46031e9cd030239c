import Foundation
import Testing

#if canImport(FoundationXML)
import FoundationXML
#endif

@Suite struct TestCommandTests {
    static let suite = "Tests/moonwireTests/Fixtures/suite"

    @Test func fixtureSuiteOutcomes() throws {
        let junit = FileManager.default.temporaryDirectory.appendingPathComponent("moonwire-junit-\(getpid()).xml").path
        let r = try CommandRunner.run("test", "--timeout", "0.5", "--junit", junit, Self.suite)
        #expect(r.status == 1)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.last == "7 passed, 5 failed, 1 skipped")

        func line(_ status: String, _ name: String) -> String? {
            lines.first { $0.hasPrefix("  \(status)  \(name)") }
        }
        #expect(line("PASS", "outcomes passes (") != nil)
        #expect(line("FAIL", "outcomes fails an assertion (") != nil)
        #expect(line("FAIL", "outcomes raises an error (") != nil)
        #expect(line("SKIP", "outcomes is pending") != nil)
        #expect(line("FAIL", "outcomes waits past its timeout (") != nil)
        #expect(line("FAIL", "outcomes loops forever (") != nil)
        #expect(line("PASS", "hooks nested sees the outer hooks first (") != nil)
        #expect(line("FAIL", "broken hook fails because of its hook (") != nil)
        #expect(line("PASS", "the timer never fired (") != nil)

        // Failures point at the user's file and line, not at moonwire.
        let outcomes = "\(Self.suite)/outcomes_test.lua"
        #expect(lines.contains("        \(outcomes):8: Expected objects to be equal."))
        #expect(lines.contains("        \(outcomes):12: kaboom"))
        #expect(lines.contains("        \(outcomes):17: timed out after 0.5 s"))
        #expect(lines.contains("        \(outcomes):23: timed out: still running without ever yielding (an endless loop?)"))
        #expect(lines.contains("        \(Self.suite)/hooks_spec.lua:21: hook exploded"))
        #expect(!r.stdout.contains("test_runner.lua"))

        // The JUnit file parses back with the same counts.
        let document = try XMLDocument(contentsOf: URL(fileURLWithPath: junit))
        let root = try #require(document.rootElement())
        #expect(root.attribute(forName: "tests")?.stringValue == "13")
        #expect(root.attribute(forName: "failures")?.stringValue == "5")
        #expect(root.attribute(forName: "skipped")?.stringValue == "1")
        let suites = root.elements(forName: "testsuite")
        #expect(suites.count == 3)
        let outcomeSuite = try #require(suites.first { $0.attribute(forName: "name")?.stringValue == outcomes })
        #expect(outcomeSuite.attribute(forName: "failures")?.stringValue == "4")
        let failure = outcomeSuite.elements(forName: "testcase")
            .first { $0.attribute(forName: "name")?.stringValue == "outcomes fails an assertion" }?
            .elements(forName: "failure").first
        #expect(failure?.attribute(forName: "message")?.stringValue == "\(outcomes):8: Expected objects to be equal.")
    }

    @Test func filterAndTap() throws {
        let r = try CommandRunner.run("test", "--tap", "--filter", "hooks", Self.suite)
        #expect(r.status == 0)
        #expect(r.stdout == """
            TAP version 13
            # \(Self.suite)/hooks_spec.lua
            ok 1 - hooks runs first
            ok 2 - hooks nested sees the outer hooks first
            1..2
            # 2 passed, 0 failed

            """)
    }

    @Test func jobsRunFilesInParallelWithTheSameResults() throws {
        let serial = try CommandRunner.run("test", "--timeout", "0.5", Self.suite)
        let parallel = try CommandRunner.run("test", "--timeout", "0.5", "--jobs", "3", Self.suite)
        #expect(parallel.status == serial.status)
        #expect(parallel.stdout.split(separator: "\n").last == serial.stdout.split(separator: "\n").last)
    }

    @Test func noTestsIsAUsageError() throws {
        let r = try CommandRunner.run("test", "examples/hello.lua/none")
        #expect(r.status == 2)
        #expect(r.stderr.contains("cannot read"))
    }
}
