import Testing

@testable import MoonwireLua

/// The options of mw.connect and mw.listen come from one table of declarations
/// (OptionDeclarations.all): these tests walk that table, so an option added there is
/// checked here without a line more.
@Suite struct SessionOptionsTests {
    /// A value of the wrong type is refused at the caller's line, naming the option,
    /// what it takes and what it got, for every option of both roles.
    @Test(arguments: SessionOption.Role.allCases)
    func everyOptionRefusesAWrongValueAtTheCallersLine(_ role: SessionOption.Role) throws {
        let options = OptionDeclarations.all.filter { $0.roles.contains(role) }
        var lines = ["errors = {}"]
        for option in options {
            // A string where a number goes, a number anywhere else.
            let wrong = option.typeText.hasPrefix("seconds") || option.typeText.hasPrefix("integer") ? "\"x\"" : "5"
            let call = role == .connect ? "mw.connect(\"ws://127.0.0.1:1/\", { \(option.name) = \(wrong) })" : "mw.listen(\"ws://127.0.0.1:0/\", { \(option.name) = \(wrong) })"
            lines.append("errors[#errors + 1] = select(2, pcall(function() \(call) end))")
        }
        let harness = ScriptHarness()
        try harness.run(lines.joined(separator: "\n"))
        let errors = try harness.global("errors").sequence.map { $0.text ?? "" }
        #expect(errors.count == options.count)
        for (i, (option, error)) in zip(options, errors).enumerated() {
            #expect(error.hasPrefix("test.lua:\(i + 2): bad argument #2 to 'mw.\(role.rawValue)' (opts.\(option.name):"), "\(option.name): \(error)")
            // codec's message lists the codecs; every other says what it got.
            #expect(option.name == "codec" || error.contains("expected, got"), "\(option.name): \(error)")
        }
    }

    /// An option of the other role is unknown, as a typo is.
    @Test func anOptionOfTheOtherRoleIsUnknown() throws {
        let harness = ScriptHarness()
        try harness.run("""
            connect_backlog = select(2, pcall(function() mw.connect("ws://127.0.0.1:1/", { backlog = 5 }) end))
            listen_headers = select(2, pcall(function() mw.listen("ws://127.0.0.1:0/", { headers = {} }) end))
            typo = select(2, pcall(function() mw.connect("ws://127.0.0.1:1/", { conect_timeout = 1 }) end))
            """)
        #expect(try harness.global("connect_backlog").text == "test.lua:1: bad argument #2 to 'mw.connect' (unknown option 'opts.backlog')")
        #expect(try harness.global("listen_headers").text == "test.lua:2: bad argument #2 to 'mw.listen' (unknown option 'opts.headers')")
        #expect(try harness.global("typo").text == "test.lua:3: bad argument #2 to 'mw.connect' (unknown option 'opts.conect_timeout')")
    }

    /// The heartbeat is parsed in one place for both roles and for c:heartbeat: the same
    /// field errors, the role's own rules (a server's has no message, a TCP client's needs one).
    @Test func heartbeatIsCheckedTheSameWayEverywhere() throws {
        let harness = ScriptHarness()
        try harness.run("""
            local function err(f) return select(2, pcall(f)) end
            errors = {
              err(function() mw.connect("ws://127.0.0.1:1/", { heartbeat = { interval = 0 } }) end),
              err(function() mw.listen("ws://127.0.0.1:0/", { heartbeat = { interval = 0 } }) end),
              err(function() mw.connect("ws://127.0.0.1:1/", { heartbeat = { message = 5 } }) end),
              err(function() mw.connect("ws://127.0.0.1:1/", { heartbeat = { reply = "x" } }) end),
              err(function() mw.connect("tcp://127.0.0.1:1", { heartbeat = { interval = 1 } }) end),
              err(function() mw.listen("ws://127.0.0.1:0/", { heartbeat = { reply = "x" } }) end),
              err(function() mw.listen("ws://127.0.0.1:0/", { heartbeat = {} }) end),
              err(function() mw.connect("ws://127.0.0.1:1/", { heartbeat = { message = "p", kind = print } }) end),
              err(function() mw.connect("ws://127.0.0.1:1/", { kind = print }) end),
            }
            local c = mw.connect("ws://127.0.0.1:1/", { reconnect = false })
            errors[#errors + 1] = err(function() c:heartbeat({ timeout = -1 }) end)
            errors[#errors + 1] = err(function() c:heartbeat({ kind = "bin", message = "p" }) end)
            c:close()
            """)
        #expect(try harness.global("errors").sequence.map { $0.text ?? "" } == [
            "test.lua:3: bad argument #2 to 'mw.connect' (opts.heartbeat.interval: must be more than 0 seconds)",
            "test.lua:4: bad argument #2 to 'mw.listen' (opts.heartbeat.interval: must be more than 0 seconds)",
            "test.lua:5: bad argument #2 to 'mw.connect' (opts.heartbeat.message: string or function expected, got number)",
            "test.lua:6: bad argument #2 to 'mw.connect' (opts.heartbeat.reply: a reply pattern needs a heartbeat message)",
            "test.lua:7: bad argument #2 to 'mw.connect' (opts.heartbeat: a tcp:// heartbeat needs a message (there is no ping))",
            "test.lua:8: bad argument #2 to 'mw.listen' (opts.heartbeat.reply: a server's heartbeat has no message: it pings WebSocket peers and drops silent ones)",
            "test.lua:9: bad argument #2 to 'mw.listen' (opts.heartbeat.timeout: seconds above 0 expected: peers silent for longer are dropped)",
            "test.lua:10: bad argument #2 to 'mw.connect' (opts.heartbeat.kind: \"text\" or \"binary\" expected, got function)",
            "test.lua:11: bad argument #2 to 'mw.connect' (opts.kind: \"auto\", \"text\" or \"binary\" expected, got function)",
            "test.lua:14: bad argument #1 to 'c:heartbeat' (opts.timeout: seconds must be from 0 to 1e9)",
            "test.lua:15: bad argument #1 to 'c:heartbeat' (opts.kind: \"text\" or \"binary\" expected, got \"bin\")",
        ])
    }

    /// Every framing of the table is written as the table says, on both roles; the
    /// errors list what the table has.
    @Test func everyDeclaredFramingParses() throws {
        var lines = ["errors = {}", "local s"]
        for framing in LuaFraming.all {
            let value = framing.word.map { "\"\($0)\"" } ?? "{ \(framing.key ?? "") = \(framing.key == "delimiter" ? "\"\\r\\n\"" : "4") }"
            lines.append("s = assert(mw.listen(\"tcp://127.0.0.1:0\", { framing = \(value) })) mw.connect(s:url(), { framing = \(value), reconnect = false }):close() s:close()")
        }
        lines.append("errors[1] = select(2, pcall(function() mw.connect(\"tcp://127.0.0.1:1\", { framing = \"lines\" }) end))")
        lines.append("errors[2] = select(2, pcall(function() mw.connect(\"tcp://127.0.0.1:1\", { framing = { size = 4 } }) end))")
        let harness = ScriptHarness()
        try harness.run(lines.joined(separator: "\n"))
        let n = LuaFraming.all.count + 3
        #expect(try harness.global("errors").sequence.map { $0.text ?? "" } == [
            "test.lua:\(n): bad argument #2 to 'mw.connect' (opts.framing: \"line\", \"raw\", a table or a function expected, got \"lines\")",
            "test.lua:\(n + 1): bad argument #2 to 'mw.connect' (opts.framing: one of delimiter, fixed or length expected)",
        ])
    }
}
