import Foundation
import Testing

/// `moonwire test` against Debian's busted, the reference runner: the probe
/// suite in Fixtures/busted_probe (a spec file per part of busted's
/// vocabulary, a .busted file with ROOT, pattern, lpath, helper,
/// exclude-tags and output) must give the same per-file counts under both.
@Suite(.timeLimit(.minutes(5))) struct BustedCompatTests {
    static let probe = CommandRunner.packageRoot.appendingPathComponent("Tests/moonwireTests/Fixtures/busted_probe")

    /// scripts/busted_compat.sh over the probe's spec/ folder, with `options` for both runners.
    static func compare(_ options: String...) throws -> CommandRunner.Result {
        try CommandRunner.run(
            ["scripts/busted_compat.sh", "Tests/moonwireTests/Fixtures/busted_probe/spec"] + options,
            environment: ["MOONWIRE": CommandRunner.executable.path], tool: "bash"
        )
    }

    /// The moonwire column of a file's row: "p/f/e/pending".
    static func moonwireCounts(_ table: String, _ file: String) -> String? {
        let row = table.split(separator: "\n").first { $0.hasPrefix("| spec/\(file) ") }
        return row.map { $0.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) } }.map { $0[2] }
    }

    @Test func probeSuiteCountsAgreeWithBusted() throws {
        let r = try Self.compare()
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        // What each probe gives (the same as busted, or the script would exit 1).
        let expected = [
            "doubles_spec.lua": "3/2/0/0", "errors_spec.lua": "1/3/6/0", "finally_spec.lua": "2/1/1/0",
            "insulate_spec.lua": "4/0/0/0", "pending_spec.lua": "0/0/1/3", "setup_spec.lua": "8/0/0/0",
            "tags_spec.lua": "4/0/0/0",
        ]
        for (file, counts) in expected {
            #expect(Self.moonwireCounts(r.stdout, file) == counts, "\(file) in\n\(r.stdout)")
        }
    }

    @Test func tagsSelectLikeBusted() throws {
        for options in [["--tags=slow"], ["--tags=fast", "--tags=slow"], ["--exclude-tags=slow,broken"]] {
            let r = try Self.compare(options[0], options.count > 1 ? options[1] : "--filter=.")
            #expect(r.status == 0, "\(options): \(r.stdout)\(r.stderr)")
        }
        let slow = try Self.compare("--tags=slow")
        #expect(Self.moonwireCounts(slow.stdout, "tags_spec.lua") == "2/0/0/0")
    }

    /// With no arguments in the probe folder, .busted gives the paths, the
    /// helper, the lpath and `output = "json"`: busted's JSON shape.
    @Test func bustedFileAndJSONOutput() throws {
        let r = try CommandRunner.run(["test"], deadline: 60, directory: Self.probe)
        #expect(r.status == 1)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        func tests(_ key: String) -> [[String: Any]] { json[key] as? [[String: Any]] ?? [] }
        #expect(tests("successes").count == 22)
        #expect(tests("failures").count == 6)
        #expect(tests("errors").count == 8)
        #expect(tests("pendings").count == 3)
        #expect(json["duration"] is Double)
        let tableError = try #require(tests("errors").first { ($0["name"] as? String) == "errors a table error value is an error" })
        #expect(tableError["message"] as? String == "spec/errors_spec.lua:8: { code = 42 }")
        #expect(tableError["isError"] as? Bool == true)
        let trace = try #require(tableError["trace"] as? [String: Any])
        #expect(trace["short_src"] as? String == "spec/errors_spec.lua")
        #expect(trace["currentline"] as? Int == 8)
        let element = try #require(tableError["element"] as? [String: Any])
        #expect(element["name"] as? String == "a table error value is an error")
        let unknown = tests("errors").first { ($0["name"] as? String) == "errors an unknown assertion is an error" }
        #expect((unknown?["message"] as? String)?.hasPrefix("spec/errors_spec.lua:7: luassert: unknown modifier/assertion") == true)
        let pending = tests("pendings").first { ($0["name"] as? String) == "pending ends the test" }
        #expect(pending?["message"] as? String == "spec/pending_spec.lua:4: not yet")
    }

    /// What busted has no counterpart for: misuse in a waiting call names the
    /// call's line, a timer that throws ends its test (one due with the test's own
    /// wait too), and luassert's state is
    /// reverted after each test (busted 2.1.1 leaves a stub in place).
    @Test func waitsTimersAndRevertedStubs() throws {
        let file = "Tests/moonwireTests/Fixtures/runner/leftovers_test.lua"
        let r = try CommandRunner.run("test", file)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.last == "2 passed, 1 failed, 5 errors", "\(r.stdout)")
        // Due in the same loop turn as the test's own mw.sleep: it still ends the test.
        #expect(lines.contains("        \(file):46: timer at the same time"), "\(r.stdout)")
        #expect(lines.contains("        \(file):9: bad argument to 'c:receive' (timeout: seconds expected, got string)"))
        #expect(lines.contains("        \(file):14: bad argument to 'c:wait_open' (timeout: seconds expected, got string)"))
        #expect(lines.contains("        \(file):18: timer exploded"))
        #expect(lines.contains("        \(file):23: { code = 42 }"))
        #expect(lines.contains { $0.hasPrefix("  FAIL  leftovers a failing assertion in a timer (") })
        #expect(lines.contains { $0.hasPrefix("  PASS  luassert's state has it back in the next test (") })
    }

    static let gtestSuite = CommandRunner.packageRoot.appendingPathComponent("Tests/moonwireTests/Fixtures/busted_gtest")

    /// Times taken out: "(0.08 ms)", "(1.49 ms total)".
    static func timeless(_ text: String) -> String {
        text.replacingOccurrences(of: #"\([0-9]+\.[0-9]+ ms"#, with: "(T ms", options: .regularExpression)
    }

    /// A suite run as busted runs it, with no options: .busted asks for gtest, spec/ and
    /// _spec are busted's defaults (spec/test_other.lua and tests/ are not run), src/ is
    /// on package.path, a module's own assert raises a string, and arg[-1] runs Lua.
    /// moonwire prints what busted 2.1.1 prints, line for line but the times.
    @Test func gtestSuiteAsBustedRunsIt() throws {
        let busted = try CommandRunner.run([], deadline: 60, tool: "busted", directory: Self.gtestSuite)
        let moonwire = try CommandRunner.run(["test"], deadline: 60, directory: Self.gtestSuite)
        #expect(busted.stdout.contains("[==========] 10 tests from 3 test files ran."), "\(busted.stdout)\(busted.stderr)")
        #expect(moonwire.status == busted.status && moonwire.status == 1)
        #expect(Self.timeless(moonwire.stdout) == Self.timeless(busted.stdout), "moonwire:\n\(moonwire.stdout)\nbusted:\n\(busted.stdout)")
        #expect(moonwire.stderr.isEmpty, "\(moonwire.stderr)")
        // The script that compares any suite the same way: counts per file, outcome per test.
        let compared = try CommandRunner.run(
            ["scripts/busted_compat.sh", "--as-configured", Self.gtestSuite.path],
            environment: ["MOONWIRE": CommandRunner.executable.path], tool: "bash"
        )
        #expect(compared.status == 0, "\(compared.stdout)\(compared.stderr)")
        let total = compared.stdout.split(separator: "\n").first { $0.hasPrefix("| total ") }
        #expect(total?.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) } == ["total", "6/1/1/2", "6/1/1/2", "yes"], "\(compared.stdout)")
        #expect(compared.stdout.contains("tests: 10 under busted, 10 under moonwire, 0 with another outcome"), "\(compared.stdout)")
    }

    /// `verbose = true` in .busted: gtest prints each failure's traceback after its
    /// message, set off by blank lines as busted does.
    @Test func gtestVerboseTraceback() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("moonwire-verbose-\(getpid())")
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("spec"), withIntermediateDirectories: true)
        try "return { default = { output = 'gtest', verbose = true } }".write(to: dir.appendingPathComponent(".busted"), atomically: true, encoding: .utf8)
        try "local function f() error('deep') end\nit('x', function()\n  f()\nend)\n"
            .write(to: dir.appendingPathComponent("spec/v_spec.lua"), atomically: true, encoding: .utf8)
        let r = try CommandRunner.run(["test"], directory: dir)
        #expect(r.status == 1)
        #expect(r.stdout.contains("[ RUN      ] spec/v_spec.lua @ 2: x\nspec/v_spec.lua:1: deep\n\nstack traceback:\n"), "\(r.stdout)")
        #expect(r.stdout.contains("\tspec/v_spec.lua:3: in "), "\(r.stdout)")
        #expect(r.stdout.contains("\n\n[  ERROR   ] spec/v_spec.lua @ 2: x ("), "\(r.stdout)")
    }

    /// Options on the command line win over .busted's (the probe's says json).
    @Test func commandLineWinsOverBustedFile() throws {
        let tap = try CommandRunner.run(["test", "--tap"], deadline: 60, directory: Self.probe)
        #expect(tap.stdout.hasPrefix("TAP version 13\n"), "\(tap.stdout.prefix(300))")
        for name in ["TAP", "tap"] {
            let r = try CommandRunner.run(["test", "-o", name], deadline: 60, directory: Self.probe)
            #expect(r.stdout.hasPrefix("TAP version 13\n"), "-o \(name): \(r.stdout.prefix(300))")
        }
        let gtest = try CommandRunner.run(["test", "-o", "gtest"], deadline: 60, directory: Self.probe)
        #expect(gtest.stdout.hasPrefix("[==========] Running tests from scanned files.\n"), "\(gtest.stdout.prefix(300))")
        let text = try CommandRunner.run(["test", "-o", "plainTerminal"], deadline: 60, directory: Self.probe)
        #expect(text.stdout.split(separator: "\n").last == "22 passed, 6 failed, 8 errors, 3 skipped", "\(text.stdout)")
    }

    /// With no path: spec/ and _spec as busted, else tests/ with moonwire's names.
    @Test func defaultFoldersAsBusted() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("moonwire-roots-\(getpid())")
        defer { try? FileManager.default.removeItem(at: dir) }
        let fm = FileManager.default
        try fm.createDirectory(at: dir.appendingPathComponent("tests"), withIntermediateDirectories: true)
        try "it('runs', function() end)".write(to: dir.appendingPathComponent("tests/a_test.lua"), atomically: true, encoding: .utf8)
        let onlyTests = try CommandRunner.run(["test"], directory: dir)
        #expect(onlyTests.status == 0 && onlyTests.stdout.hasSuffix("1 passed, 0 failed\n"), "\(onlyTests)")
        try fm.createDirectory(at: dir.appendingPathComponent("spec"), withIntermediateDirectories: true)
        try "it('runs', function() end)".write(to: dir.appendingPathComponent("spec/test_b.lua"), atomically: true, encoding: .utf8)
        let noMatch = try CommandRunner.run(["test"], directory: dir)
        #expect(noMatch.status == 2 && noMatch.stderr.contains("no test files (*.lua matching _spec) in spec"), "\(noMatch)")
        try "it('a', function() end) it('b', function() end)".write(to: dir.appendingPathComponent("spec/b_spec.lua"), atomically: true, encoding: .utf8)
        let spec = try CommandRunner.run(["test"], directory: dir)
        #expect(spec.status == 0 && spec.stdout.hasPrefix("spec/b_spec.lua\n") && spec.stdout.hasSuffix("2 passed, 0 failed\n"), "\(spec)")
    }

    @Test func badOptionsAreUsageErrors() throws {
        let output = try CommandRunner.run("test", "-o", "xml", "Tests/moonwireTests/Fixtures/suite")
        #expect(output.status == 2)
        #expect(output.stderr.contains("unknown --output 'xml'"))
        let both = try CommandRunner.run("test", "--tags", "a", "--exclude-tags", "a", "Tests/moonwireTests/Fixtures/suite")
        #expect(both.stderr.contains("--tags and --exclude-tags both name 'a'"))

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("moonwire-busted-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        for (config, message) in [
            ("return 5", "bad .busted file: .busted returns a number, not a table of tasks"),
            ("error('no')", "bad .busted file: .busted:1: no"),
            ("return { default = { output = 'xml' } }", "unknown output 'xml' in .busted; use text, utfTerminal, plainTerminal, TAP, json, junit, gtest"),
        ] {
            try config.write(to: dir.appendingPathComponent(".busted"), atomically: true, encoding: .utf8)
            let r = try CommandRunner.run(["test"], directory: dir)
            #expect(r.status == 2)
            #expect(r.stderr.contains(message), "\(r.stderr)")
        }
    }
}
