import Foundation
import Testing

/// Editor completion and checks: the LuaLS definitions declare exactly what the program
/// binds, `moonwire init` writes a project editors and luacheck understand, and
/// `moonwire check` finds names of the API that do not exist.
@Suite(.timeLimit(.minutes(5))) struct DefinitionsTests {
    static let fixtures = "Tests/moonwireTests/Fixtures/definitions"

    /// Both lists derived, neither written down twice: the declared names come from the
    /// definition files (`moonwire defs`), the bound ones from the running program (every
    /// name under `mw`, every method of the objects it returns, the globals of a test
    /// file). Each must have the other.
    @Test func everyBindingHasADefinitionAndEveryDefinitionABinding() throws {
        let declared = try CommandRunner.run("defs")
        #expect(declared.status == 0, "\(declared.stderr)")
        let declaredNames = Set(declared.stdout.split(separator: "\n").map(String.init))

        let run = try CommandRunner.run("run", "\(Self.fixtures)/bindings.lua")
        #expect(run.status == 0, "\(run.stderr)")
        let runLines = run.stdout.split(separator: "\n").map(String.init)
        let scriptGlobals = Set(runLines.filter { $0.hasPrefix("G:") }.map { String($0.dropFirst(2)) })
        let bound = Set(runLines.filter { !$0.hasPrefix("G:") && !$0.hasPrefix("A:") })

        let test = try CommandRunner.run("test", "\(Self.fixtures)/globals_spec.lua")
        #expect(test.status == 0, "\(test.stderr)")
        let testGlobals = Set(test.stdout.split(separator: "\n").filter { $0.hasPrefix("T:") }.map { String($0.dropFirst(2)) })
        // What a test file has that a script does not: busted's vocabulary and luassert's.
        // `assert` is in both (Lua's own in a script), so it is taken from the declarations' side.
        let boundTestGlobals = testGlobals.subtracting(scriptGlobals).union(testGlobals.contains("assert") ? ["assert"] : [])
        let bindings = bound.union(boundTestGlobals.map { "test:" + $0 })

        #expect(bound.count > 80, "the bindings dump found too little: \(bound.sorted())")
        let undeclared = bindings.subtracting(declaredNames).sorted()
        let unbound = declaredNames.subtracting(bindings).sorted()
        #expect(undeclared.isEmpty, "bound but not in Sources/MoonwireLua/resources/definitions/: \(undeclared)")
        #expect(unbound.isEmpty, "declared in the definitions but not bound: \(unbound)")

        // The functions written in Lua (the prelude's) also say how many parameters they
        // take: the declaration must take as many (a binding with `...` takes at least its own).
        let declaredParameters = try CommandRunner.run("defs", "--parameters")
        var declaredCount: [String: String] = [:]
        for line in declaredParameters.stdout.split(separator: "\n") {
            let parts = line.split(separator: " ")
            declaredCount[String(parts[0])] = String(parts[1])
        }
        let boundCounts = runLines.filter { $0.hasPrefix("A:") }.map { $0.dropFirst(2).split(separator: " ").map(String.init) }
        #expect(boundCounts.count > 40, "too few Lua-defined functions found: \(boundCounts.count)")
        for pair in boundCounts {
            let (name, count) = (pair[0], pair[1])
            guard let declared = declaredCount[name] else { continue }
            let bindingTakesMore = count.hasSuffix("+")
            let fixed = Int(count.dropLast(bindingTakesMore ? 1 : 0)) ?? -1
            let declaredFixed = Int(declared.hasSuffix("+") ? declared.dropLast() : Substring(declared)) ?? -2
            let agrees = bindingTakesMore ? (declaredFixed >= fixed || declared.hasSuffix("+")) : declared == count
            #expect(agrees, "\(name) takes \(count) parameters (self included), declared \(declared)")
        }
    }

    @Test func initWritesAProjectThatRunsTestsAndLintsClean() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("moonwire-init-\(getpid())")
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = try CommandRunner.run("init", dir.path)
        #expect(first.status == 0, "\(first.stderr)")
        for file in ["bot.lua", "greeting.lua", "spec/greeting_spec.lua", ".luarc.json", ".luacheckrc",
                     ".moonwire/library/moonwire.lua", ".moonwire/library/busted.lua"] {
            #expect(first.stdout.contains("wrote \(dir.path)/\(file)\n"), "\(file): \(first.stdout)")
        }
        let luarc = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent(".luarc.json"))) as? [String: Any]
        #expect(luarc?["workspace.library"] as? [String] == [".moonwire/library"])
        #expect(luarc?["runtime.version"] as? String == "Lua 5.4")

        let again = try CommandRunner.run("init", dir.path)
        #expect(again.stdout.contains("kept \(dir.path)/bot.lua (it exists; --force overwrites)"), "\(again.stdout)")

        let bot = try CommandRunner.run(["run", "bot.lua"], directory: dir)
        #expect(bot.status == 0, "\(bot.stderr)")
        #expect(bot.stdout == "hello from moonwire\n")
        let tests = try CommandRunner.run(["test"], directory: dir)
        #expect(tests.status == 0, "\(tests.stdout)\(tests.stderr)")
        #expect(tests.stdout.contains("2 passed, 0 failed"), "\(tests.stdout)")
        let check = try CommandRunner.run(["check", "bot.lua", "greeting.lua", "spec/greeting_spec.lua"], directory: dir)
        #expect(check.status == 0, "\(check.stderr)")

        // luacheck with the std init wrote: the starter project lints clean, and the
        // std knows mw's fields (a misspelt one is a warning) and the test globals.
        try "mw.conect('ws://x/')\nit('x', function() end)\n".write(to: dir.appendingPathComponent("typo.lua"), atomically: true, encoding: .utf8)
        let lint = try CommandRunner.run(["--no-color", "-q", "--config", ".luacheckrc", "bot.lua", "greeting.lua", "spec", "typo.lua"], tool: "luacheck", directory: dir)
        #expect(lint.stdout.contains("typo.lua:1:1: accessing undefined field 'conect' of global 'mw'"), "\(lint.stdout)")
        #expect(lint.stdout.contains("typo.lua:2:1: accessing undefined variable 'it'"), "\(lint.stdout)")
        #expect(lint.stdout.contains("Total: 2 warnings / 0 errors in 4 files"), "\(lint.stdout)")
    }

    /// `moonwire check` finds misspelt names of the API, with their lines, beside syntax
    /// errors; strings and comments are not code.
    @Test func checkReportsNamesThatDoNotExist() throws {
        let path = try CommandRunner.script("typos.lua", """
            local c = mw.connect("ws://127.0.0.1:9/")   -- mw.nothing here is a comment
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            c:sendd("hi")
            mw.conect("x")
            print(mw.json.encod({}), mw.args[1], mw.shard.index, "c:sendd")
            mw.mine = true
            s:on_connect(function(peer) peer:sned("welcome") peer:send("ok") end)
            c:on_message(function(conn) conn:recieve() end)
            mw.after(1, function() end):cancel()
            local t = mw.every(1, function() end)
            t:cancle()
            """)
        let r = try CommandRunner.run("check", path, "examples/echo_client.lua")
        #expect(r.status == 1)
        #expect(r.stderr == """
            \(path):3: unknown method c:sendd: a connection has no method 'sendd' (did you mean c:send?)
            \(path):4: unknown mw.conect: moonwire has no such function or field (did you mean mw.connect?)
            \(path):5: unknown mw.json.encod: moonwire has no such name here (did you mean mw.json.encode?)
            \(path):7: unknown method peer:sned: a peer has no method 'sned' (did you mean peer:send?)
            \(path):8: unknown method conn:recieve: a connection has no method 'recieve' (did you mean conn:receive?)
            \(path):11: unknown method t:cancle: a timer has no method 'cancle' (did you mean t:cancel?)

            """)
        let examples = try FileManager.default.contentsOfDirectory(atPath: CommandRunner.packageRoot.appendingPathComponent("examples").path)
            .filter { $0.hasSuffix(".lua") }.map { "examples/" + $0 }
        let clean = try CommandRunner.run(["check"] + examples)
        #expect(clean.status == 0, "\(clean.stderr)")
    }

    /// The option tables of mw.connect and mw.listen (and the fields of tls, heartbeat, reconnect, queue) in docs/scripting.md are the ones
    /// the declarations give (`moonwire defs --options`); scripts/option_docs.py writes them.
    @Test func optionTablesInTheDocsAreTheDeclarations() throws {
        let generated = try CommandRunner.run("defs", "--options")
        #expect(generated.status == 0, "\(generated.stderr)")
        let blocks = generated.stdout.components(separatedBy: "<!-- /options -->\n").filter { !$0.isEmpty }.map { $0 + "<!-- /options -->\n" }
        // mw.connect's and mw.listen's options, then the fields of tls, heartbeat, reconnect and queue
        #expect(blocks.count == 6, "\(generated.stdout)")
        #expect(blocks.prefix(2).allSatisfy { $0.contains("| `framing` |") && $0.contains("| `heartbeat` |") }, "\(generated.stdout)")
        #expect(blocks.contains { $0.contains("<!-- options: reconnect -->") && $0.contains("| `stop_codes` |") }, "\(generated.stdout)")
        #expect(blocks.contains { $0.contains("<!-- options: heartbeat -->") && $0.contains("| `reply` |") }, "\(generated.stdout)")
        let doc = try String(contentsOf: CommandRunner.packageRoot.appendingPathComponent("docs/scripting.md"), encoding: .utf8)
        for block in blocks {
            let marker = block.prefix { $0 != "\n" }
            #expect(doc.contains(block), "docs/scripting.md's \(marker) table is not the declarations' one: run scripts/option_docs.py")
        }
    }

    /// Every flag of the "Connection" group of `connect` and `listen` is declared with the
    /// option it sets, and every flag an option declares is there: the two cannot drift.
    @Test(arguments: ["connect", "listen"])
    func everyConnectionFlagHasAnOptionAndEveryDeclaredFlagAFlag(_ command: String) throws {
        let declaredList = try CommandRunner.run("defs", "--option-flags")
        #expect(declaredList.status == 0, "\(declaredList.stderr)")
        var declared: Set<String> = []
        for line in declaredList.stdout.split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            if words.count == 3 && words[0] == command { declared.insert(words[1]) }
        }
        let dump = try CommandRunner.run(command, "--experimental-dump-help")
        let info = try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any]
        let arguments = (info?["command"] as? [String: Any])?["arguments"] as? [[String: Any]] ?? []
        let flags = Set(arguments.filter { $0["sectionTitle"] as? String == "Connection" }.compactMap { argument in
            (argument["names"] as? [[String: String]])?.first { $0["kind"] == "long" }.map { "--" + ($0["name"] ?? "") }
        })
        #expect(declared.count >= 6, "\(declaredList.stdout)")
        #expect(flags == declared, "flags without a declaration: \(flags.subtracting(declared).sorted()); declared but no flag: \(declared.subtracting(flags).sorted())")
    }
}
