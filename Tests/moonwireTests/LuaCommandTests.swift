import Foundation
import Testing

/// `moonwire lua`: lua5.4's command line with `mw` loaded, through pipes; its REPL
/// through a pseudo-terminal (Interactive/lua_repl.py, pexpect and a Python
/// websockets echo server from the venv of Tests/MoonwireCoreTests/Peers/setup_venv.sh).
@Suite(.timeLimit(.minutes(5))) struct LuaCommandTests {
    static func lua(_ arguments: String..., input: String? = nil, environment: [String: String] = [:]) throws -> CommandRunner.Result {
        try CommandRunner.run(["lua"] + arguments, input: input, deadline: 60, environment: environment)
    }

    @Test func executeVersionAndUsage() throws {
        let e = try Self.lua("-e", "print(1 + 1)", "-e", "x = 40", "-e", "print(x + 2)")
        #expect(e.status == 0 && e.stdout == "2\n42\n", "\(e)")
        let v = try Self.lua("-v")
        #expect(v.status == 0 && v.stdout.hasPrefix("Lua 5.4") && v.stdout.contains("Copyright"), "\(v)")
        let bad = try Self.lua("-x")  // lua.c's usage text
        #expect(bad.status == 1)
        #expect(bad.stderr.hasPrefix("moonwire lua: unrecognized option '-x'\nusage: moonwire lua [options] [script [args]]"), "\(bad.stderr)")
        let help = try Self.lua("--help")
        #expect(help.status == 0 && help.stdout.contains("USAGE: moonwire lua"), "\(help)")
        let missing = try Self.lua("-e")
        #expect(missing.status == 1 && missing.stderr.hasPrefix("moonwire lua: '-e' needs argument"), "\(missing.stderr)")
    }

    /// warn() prints only after -W, as in lua.
    @Test func warningsWithW() throws {
        let on = try Self.lua("-W", "-e", "warn('x', 'y') warn('z')")
        #expect(on.status == 0 && on.stderr == "Lua warning: xy\nLua warning: z\n", "\(on)")
        let off = try Self.lua("-e", "warn('x')")
        #expect(off.status == 0 && off.stderr.isEmpty, "\(off)")
    }

    /// As lua.c: the script at arg[0], its arguments after it (and as `...`), the
    /// interpreter and the options before it.
    @Test func scriptArgumentsAndArgTable() throws {
        let script = try CommandRunner.script("args.lua", """
            print(arg[0] == ..., select("#", ...), ...)
            print(arg[-1], arg[-2] ~= nil, arg[1], arg[2])
            """)
        let r = try Self.lua("-e", "n = 1", script, "a", "b")
        // `...` is the script's arguments: arg[0] is not among them.
        #expect(r.status == 0, "\(r)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "false\t2\ta\tb", "\(r.stdout)")
        #expect(lines.last == "n = 1\ttrue\ta\tb", "\(r.stdout)")
        let stdin = try Self.lua("-", "x", input: "print(arg[0], ...)\n")
        #expect(stdin.status == 0 && stdin.stdout == "-\tx\n", "\(stdin)")
        let piped = try Self.lua(input: "print('from stdin')\n")
        #expect(piped.status == 0 && piped.stdout == "from stdin\n", "\(piped)")
    }

    /// `io.popen(arg[-1] .. " -e ...")` runs this interpreter, as with busted's arg[-1].
    @Test func argMinusOneRunsLua() throws {
        let r = try Self.lua("-e", #"local p = io.popen(arg[0] .. " -e 'print(6 * 7)'") print(p:read("a")) p:close()"#)
        #expect(r.status == 0 && r.stdout == "42\n\n", "\(r)")
        let script = try CommandRunner.script("popen.lua", #"local p = io.popen(arg[-1] .. " -e 'print(mw ~= nil)'") io.write(p:read("a")) p:close()"#)
        let s = try Self.lua(script)
        #expect(s.status == 0 && s.stdout == "true\n", "\(s)")
    }

    @Test func librariesAndEnvironment() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("moonwire-lua-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "return { answer = 42 }".write(to: dir.appendingPathComponent("deep.lua"), atomically: true, encoding: .utf8)
        let path = ["LUA_PATH_5_4": dir.path + "/?.lua;;", "LUA_INIT": "greeting = 'hi'"]
        let l = try Self.lua("-l", "deep", "-l", "d=deep", "-e", "print(deep.answer, d.answer, greeting)", environment: path)
        #expect(l.status == 0 && l.stdout == "42\t42\thi\n", "\(l)")
        // -E: LUA_PATH and LUA_INIT are not read.
        let ignored = try Self.lua("-E", "-e", "print(greeting)", "-l", "deep", environment: path)
        #expect(ignored.status == 1, "\(ignored)")
        #expect(ignored.stdout == "nil\n")
        #expect(ignored.stderr.hasPrefix("lua: module 'deep' not found"), "\(ignored.stderr)")
    }

    /// An error prints "lua: message" and the traceback, and exits 1, as lua does.
    @Test func errorsExitOne() throws {
        let r = try Self.lua("-e", "error('boom')")
        #expect(r.status == 1)
        #expect(r.stderr.hasPrefix("lua: (command line):1: boom\nstack traceback:"), "\(r.stderr)")
        #expect(!r.stderr.contains("moonwire/"), "\(r.stderr)")
        let syntax = try Self.lua("-e", "x = ")
        #expect(syntax.status == 1 && syntax.stderr.hasPrefix("lua: (command line):1: unexpected symbol near <eof>"), "\(syntax.stderr)")
    }

    /// No callback time limit unless asked for: a computation longer than `moonwire run`'s
    /// warning (1 s) goes through in silence; one the script limits is interrupted.
    @Test func computesWithoutTimeLimit() throws {
        let r = try Self.lua("-e", "local t = os.clock() while os.clock() - t < 1.2 do end print('done', mw.limits().callback_timeout)")
        #expect(r.status == 0 && r.stdout == "done\t0.0\n", "\(r)")
        #expect(r.stderr.isEmpty, "\(r.stderr)")
        let limited = try Self.lua("-e", "mw.limits { callback_timeout = 0.2 } while true do end")
        #expect(limited.status == 1)
        #expect(limited.stderr.contains("(command line):1: interrupted"), "\(limited.stderr)")
    }

    /// The event loop runs after the chunks: a server and a client of its own talk until mw.exit.
    @Test func eventLoopRunsAfterTheScript() throws {
        let r = try Self.lua("-e", """
            local s = mw.listen("ws://127.0.0.1:0")
            s:on_message(function(peer, m) peer:send("echo " .. m) end)
            local c = mw.connect(s:url())
            c:on_message(function(_, m) print(m) mw.exit(3) end)
            c:send("hi")
            """)
        #expect(r.status == 3 && r.stdout == "echo hi\n", "\(r)")
    }

    /// `-i` through pipes: lua.c's REPL, prompts on stdout; values through mw.inspect.
    @Test func replThroughPipes() throws {
        let r = try Self.lua("-i", input: "1 + 1\n=\"s\"\nt = { a = 1 }\nt\nfor i = 1, 2 do\nprint(i)\nend\nerror('x')\nprint('still here')\n")
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.hasPrefix("Lua 5.4"), "\(r.stdout)")
        let session = r.stdout.split(separator: "\n", maxSplits: 1).last.map(String.init) ?? ""
        #expect(session == "> 2\n> \"s\"\n> > { a = 1 }\n> >> >> 1\n2\n> > still here\n> \n", "\(session)")
        #expect(r.stderr.hasPrefix("stdin:1: x\nstack traceback:"), "\(r.stderr)")
    }

    /// examples/lua_prototype.lua, as its comment says to use it (through a pipe here).
    @Test func prototypeExample() throws {
        let r = try Self.lua("-i", "examples/lua_prototype.lua", input: """
            c:send({ op = "hello", n = 1 })
            mw.sleep(0.2)
            codec.encode = function(t) return mw.json.encode({ v = 2, body = t }) end
            reconnect()
            c:send({ op = "again" })
            mw.sleep(0.2)

            """)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("got\t{ n = 1, op = \"hello\" }\n"), "\(r.stdout)")
        #expect(r.stdout.contains("got\t{ op = \"again\" }\n"), "\(r.stdout)")
    }

    @Test(arguments: ["tty_echo", "tty_interrupt"]) func replThroughATerminal(_ scenario: String) throws {
        let python = try EchoPeer.python()
        let r = try CommandRunner.run(
            [CommandRunner.packageRoot.appendingPathComponent("Tests/moonwireTests/Interactive/lua_repl.py").path, CommandRunner.executable.path, scenario],
            tool: python
        )
        #expect(r.status == 0, "\(r.stdout.suffix(6000))\(r.stderr.suffix(2000))")
    }
}
