import Foundation
import Testing

#if canImport(FoundationXML)
import FoundationXML
#endif

@Suite(.timeLimit(.minutes(5))) struct TestCommandTests {
    static let suite = "Tests/moonwireTests/Fixtures/suite"

    @Test func fixtureSuiteOutcomes() throws {
        let junit = Scratch.root.appendingPathComponent("junit.xml").path
        let r = try CommandRunner.run("test", "--timeout", "0.5", "--junit", junit, Self.suite)
        #expect(r.status == 1)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.last == "7 passed, 1 failed, 4 errors, 1 skipped")

        func line(_ status: String, _ name: String) -> String? {
            lines.first { $0.hasPrefix("  \(status)  \(name)") }
        }
        #expect(line("PASS", "outcomes passes (") != nil)
        #expect(line("FAIL", "outcomes fails an assertion (") != nil)
        #expect(line("ERR ", "outcomes raises an error (") != nil)
        #expect(line("SKIP", "outcomes is pending") != nil)
        #expect(line("ERR ", "outcomes waits past its timeout (") != nil)
        #expect(line("ERR ", "outcomes loops forever (") != nil)
        #expect(line("PASS", "hooks nested sees the outer hooks first (") != nil)
        #expect(line("ERR ", "broken hook fails because of its hook (") != nil)
        #expect(line("PASS", "the timer never fired (") != nil)

        // Failures point at the user's file and line, not at moonwire; a timeout at
        // the line where the test waited.
        let outcomes = "\(Self.suite)/outcomes_test.lua"
        #expect(lines.contains("        \(outcomes):8: Expected objects to be equal."))
        #expect(lines.contains("        \(outcomes):12: kaboom"))
        #expect(lines.contains("        \(outcomes):18: timed out after 0.5 s waiting in mw.sleep"))
        #expect(lines.contains("        \(outcomes):23: timed out: still running without ever yielding (an endless loop?)"))
        #expect(lines.contains("        \(Self.suite)/hooks_spec.lua:21: hook exploded"))
        #expect(!r.stdout.contains("test_runner.lua"))

        // The JUnit file is valid by the schema, and parses back with the same counts.
        try Self.validate(junit: junit)
        let document = try XMLDocument(contentsOf: URL(fileURLWithPath: junit))
        let root = try #require(document.rootElement())
        #expect(root.attribute(forName: "tests")?.stringValue == "13")
        #expect(root.attribute(forName: "failures")?.stringValue == "1")
        #expect(root.attribute(forName: "errors")?.stringValue == "4")
        #expect(root.attribute(forName: "skipped")?.stringValue == "1")
        let suites = root.elements(forName: "testsuite")
        #expect(suites.count == 3)
        let outcomeSuite = try #require(suites.first { $0.attribute(forName: "name")?.stringValue == outcomes })
        #expect(outcomeSuite.attribute(forName: "failures")?.stringValue == "1")
        #expect(outcomeSuite.attribute(forName: "errors")?.stringValue == "3")
        func testcase(_ name: String) -> XMLElement? {
            outcomeSuite.elements(forName: "testcase").first { $0.attribute(forName: "name")?.stringValue == name }
        }
        let failed = try #require(testcase("outcomes fails an assertion"))
        #expect(failed.attribute(forName: "file")?.stringValue == outcomes)
        #expect(failed.attribute(forName: "line")?.stringValue == "7")
        let failure = failed.elements(forName: "failure").first
        #expect(failure?.attribute(forName: "message")?.stringValue == "\(outcomes):8: Expected objects to be equal.")
        let raised = try #require(testcase("outcomes raises an error"))
        #expect(raised.elements(forName: "failure").isEmpty)
        #expect(raised.elements(forName: "error").first?.attribute(forName: "message")?.stringValue == "\(outcomes):12: kaboom")
    }

    /// Checks a JUnit file with a real validator: xmllint against the schema in Fixtures.
    static func validate(junit: String) throws {
        let schema = CommandRunner.packageRoot.appendingPathComponent("Tests/moonwireTests/Fixtures/junit.xsd").path
        let xmllint = Process()
        xmllint.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        xmllint.arguments = ["xmllint", "--noout", "--schema", schema, junit]
        let err = Pipe()
        xmllint.standardError = err
        xmllint.standardOutput = FileHandle.nullDevice
        try xmllint.run()
        let deadline = ProcessDeadline(xmllint, seconds: 60)
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        xmllint.waitUntilExit()
        deadline.check("xmllint")
        // 127: not installed (scripts/deps.sh --test installs libxml2-utils).
        #expect(xmllint.terminationStatus == 0, "xmllint --schema junit.xsd: \(message)")
    }

    static let isolation = "Tests/moonwireTests/Fixtures/isolation"

    /// The first test fails while its connection still dials: the other three
    /// still run (before the fix: "0 passed, 1 failed", and a complaint on stderr
    /// about an event loop that had shut down).
    @Test func aFailureWhileDialingTakesOnlyItsOwnTest() throws {
        let r = try CommandRunner.run("test", "\(Self.isolation)/dialing_test.lua")
        #expect(r.status == 1)
        #expect(r.stdout.hasSuffix("\n3 passed, 1 failed\n"), "\(r.stdout)")
        #expect(!r.stderr.contains("EventLoop"), "\(r.stderr)")
    }

    /// Files that end while their connections and servers are still open or
    /// closing (before the fix: exit 134, "Attempted to read an unowned reference").
    @Test func filesEndingWhileTheyCloseNeverCrash() throws {
        for run in 1...20 {
            let r = try CommandRunner.run(["test", "--repeat", "3", "\(Self.isolation)/closing_test.lua"], deadline: 60)
            #expect(r.status == 0, "run \(run): exit \(r.status)\n\(r.stderr)")
            #expect(r.stdout.hasSuffix("\n9 passed, 0 failed\n"), "run \(run): \(r.stdout)")
            if r.status != 0 { break }
        }
    }

    /// A test that times out in a shipped module's call, or in a future, says which
    /// (the name the wait gave itself), at the test's own line.
    @Test func timeoutInAModuleCallNamesTheCall() throws {
        let file = try CommandRunner.script("module_wait_test.lua", """
            local ocpp = require "moonwire.ocpp"
            describe("waits", function()
              it("in a module call", function()
                local cs = assert(ocpp.listen("ws://127.0.0.1:0/ocpp", { version = "1.6" }))
                cs:on("Heartbeat", function() mw.future():wait() end)
                local cp = ocpp.connect(cs:url() .. "cp1", { version = "1.6" })
                assert(cp:wait_open(5))
                cp:call("Heartbeat", {}, 30)
              end)
              it("in a named future", function()
                mw.future("the reply"):wait()
              end)
            end)
            """)
        let r = try CommandRunner.run("test", "--timeout", "0.5", file)
        #expect(r.status == 1)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("        \(file):8: timed out after 0.5 s waiting in cp:call"), "\(r.stdout)")
        #expect(lines.contains("        \(file):11: timed out after 0.5 s waiting in the reply"), "\(r.stdout)")
    }

    /// Failures, errors and timeouts end their own test only; hooks still run;
    /// a callback's error fails the running test at the callback's line.
    @Test func eachTestIsIsolated() throws {
        let file = "\(Self.isolation)/isolation_test.lua"
        let r = try CommandRunner.run("test", "--timeout", "3", file)
        #expect(r.status == 1)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.last == "4 passed, 2 failed, 3 errors", "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("  FAIL  isolation fails while dialing (") })
        #expect(lines.contains("        \(file):23: timed out after 3 s waiting in c:request"))
        #expect(lines.contains("        \(file):28: callback exploded"))
        #expect(lines.contains { $0.hasPrefix("  FAIL  isolation fails an assertion in a callback (") })
        #expect(lines.contains("        \(file):36: Expected objects to be equal."))
        #expect(lines.contains("        \(file):44: bad argument #1 to 'c:request' (message expected, got nil)"))
        #expect(lines.contains { $0.hasPrefix("  PASS  isolation starts clean (") }, "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("  PASS  saw teardown run after the failures (") })
        #expect(lines.contains { $0.hasPrefix("  PASS  coroutines a test spawned never sees it wake (") })
        #expect(!r.stdout.contains("moonwire/prelude") && !r.stdout.contains("test_runner.lua"))
    }

    /// The connection and server API over real sockets; `require` finds a module next to the test file.
    @Test func apiFixturesPass() throws {
        let r = try CommandRunner.run("test", "Tests/moonwireTests/Fixtures/api")
        #expect(r.status == 0, "\(r.stdout)")
        #expect(r.stdout.hasSuffix("22 passed, 0 failed\n"), "\(r.stdout)")
    }

    @Test func tapCarriesAYAMLBlockForFailuresAndErrors() throws {
        let r = try CommandRunner.run("test", "--tap", "--filter", "raises an error", "\(Self.suite)/outcomes_test.lua")
        #expect(r.status == 1)
        let file = "\(Self.suite)/outcomes_test.lua"
        #expect(r.stdout.hasPrefix("""
            TAP version 13
            # \(file)
            not ok 1 - outcomes raises an error
              ---
              message: "\(file):12: kaboom"
              severity: error
              at:
                file: "\(file)"
                line: 12

            """), "\(r.stdout)")
        #expect(r.stdout.contains("\n  duration_ms: "))
        #expect(r.stdout.hasSuffix("  ...\n1..1\n# 0 passed, 0 failed, 1 errors\n"))
    }

    @Test func listPrintsTestsWithoutRunningThem() throws {
        let r = try CommandRunner.run("test", "--list", "\(Self.suite)/outcomes_test.lua")
        #expect(r.status == 0)
        let file = "\(Self.suite)/outcomes_test.lua"
        #expect(r.stdout.hasPrefix("""
            \(file):3: outcomes passes
            \(file):7: outcomes fails an assertion
            \(file):11: outcomes raises an error
            """))
        #expect(r.stdout.split(separator: "\n").count == 7)
        #expect(!r.stdout.contains("passed"))
    }

    @Test func shuffleWithASeedGivesTheSameOrderAgain() throws {
        func order(_ seed: String) throws -> [String] {
            let r = try CommandRunner.run("test", "--list", "--shuffle", "--seed", seed, Self.suite)
            #expect(r.status == 0)
            return r.stdout.split(separator: "\n").map(String.init)
        }
        let first = try order("42")
        #expect(first.count == 13)
        #expect(try order("42") == first)
        let others = try (1...4).map { try order(String($0)) }
        #expect(others.contains { $0 != first }, "five seeds, one order")
        #expect(Set(others[0]) == Set(first))

        let run = try CommandRunner.run("test", "--shuffle", "--seed", "7", "--timeout", "0.5", Self.suite)
        #expect(run.stdout.contains("\nshuffled with --seed 7\n"))
        #expect(run.stdout.hasSuffix("7 passed, 1 failed, 4 errors, 1 skipped\n"))
    }

    @Test func failFastStopsAtTheFirstFailure() throws {
        let r = try CommandRunner.run("test", "--fail-fast", "--timeout", "0.5", Self.suite)
        #expect(r.status == 1)
        // hooks_spec.lua runs first: its third test errs, and nothing runs after it.
        #expect(r.stdout.hasSuffix("\n2 passed, 0 failed, 1 errors\n"), "\(r.stdout)")
        #expect(!r.stdout.contains("outcomes_test.lua"))
    }

    @Test func repeatRunsEachFileAgainInANewState() throws {
        let r = try CommandRunner.run("test", "--repeat", "3", "\(Self.suite)/hooks_spec.lua")
        #expect(r.stdout.contains("hooks_spec.lua (run 3)\n"))
        #expect(r.stdout.hasSuffix("\n9 passed, 0 failed, 3 errors\n"), "\(r.stdout)")
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
