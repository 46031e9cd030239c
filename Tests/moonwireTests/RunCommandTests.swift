import Foundation
import Testing

@Suite(.timeLimit(.minutes(5))) struct RunCommandTests {
    @Test func helloExample() throws {
        let r = try CommandRunner.run("run", "examples/hello.lua", "moon")
        #expect(r.status == 0)
        #expect(r.stdout == "hello, moon\n{\"greeting\":\"moon\"}\n6d6f6f6e\tbW9vbg==\n")
        #expect(r.stderr.contains("INFO  moonwire 0.1.0 on Lua 5.4"))
    }

    @Test func timersExample() throws {
        let r = try CommandRunner.run("run", "examples/timers.lua")
        #expect(r.status == 0)
        #expect(r.stdout == "tick 1\nworker woke 1\ntick 2\nafter 250 ms\ntick 3\nworker woke 2\n")
    }

    @Test func futureExample() throws {
        let r = try CommandRunner.run("run", "examples/future.lua")
        #expect(r.status == 0)
        #expect(r.stdout == "watcher:\tpong ping\nmain:\tpong ping\nlater:\tpong ping\nset again:\tfalse\n"
            + "timeout:\tnil\ttimeout\nis set:\tfalse\n")
    }

    /// An error raised by a coroutine that f:set woke is that coroutine's: reported once,
    /// at its line, with one traceback (not raised again in the callback that set it).
    @Test func errorAfterFutureWaitIsReportedOnceAtItsLine() throws {
        let path = try CommandRunner.script("woken.lua", """
            local f = mw.future()
            mw.spawn(function()
              f:wait()
              error("after the wait")
            end)
            mw.after(0.01, function() f:set() end)
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 1)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.first == "\(path):4: after the wait")
        #expect(r.stderr.components(separatedBy: "stack traceback:").count == 2)
        #expect(!r.stderr.contains("moonwire/runtime.lua"))
    }

    @Test func uncaughtErrorPrintsLocationAndTracebackThenExitsOne() throws {
        let path = try CommandRunner.script("boom.lua", """
            local function explode() error("boom") end
            mw.after(0.01, function() explode() end)
            mw.after(5, function() print("not reached") end)
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 1)
        #expect(r.stdout == "")
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.first == "\(path):1: boom")
        #expect(lines.dropFirst().first == "stack traceback:")
        #expect(r.stderr.contains("\(path):2: in function <\(path):2>"))
    }

    @Test func keepGoingLogsErrorsAndGoesOn() throws {
        let path = try CommandRunner.script("flaky.lua", """
            local n = 0
            mw.every(0.005, function(t)
              n = n + 1
              if n == 3 then t:cancel() print("done after " .. n) end
              if n < 3 then error("tick " .. n .. " failed") end
            end)
            """)
        let r = try CommandRunner.run("run", "--keep-going", path)
        #expect(r.status == 0)
        #expect(r.stdout == "done after 3\n")
        #expect(r.stderr.contains("\(path):5: tick 1 failed"))
        #expect(r.stderr.contains("\(path):5: tick 2 failed"))
    }

    @Test func syntaxErrorExitsOneBeforeAnythingRuns() throws {
        let path = try CommandRunner.script("broken.lua", "print('ran')\nlocal x = = 1\n")
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 1)
        #expect(r.stdout == "")
        #expect(r.stderr.hasPrefix("\(path):2: unexpected symbol near '='"))
    }

    /// 100 000 calls of Swift-backed functions with bad arguments, each raising a
    /// Lua error that pcall catches: the process's resident memory stays flat.
    @Test func raisedErrorsDoNotGrowTheProcess() throws {
        let path = try CommandRunner.script("leak.lua", """
            local function rss()
              local status = assert(io.open("/proc/self/status")):read("a")
              return tonumber(status:match("VmRSS:%s*(%d+)"))
            end
            local function burst(n)
              for i = 1, n do
                pcall(mw.hex, {})
                pcall(mw.after, nil, i)
                pcall(mw.unbase64, print)
              end
              collectgarbage("collect")
            end
            burst(20000)
            local before = rss()
            burst(100000)
            print(rss() - before)
            """)
        // A stress loop in the main chunk: slow machines must not hit the callback timeout.
        let r = try CommandRunner.run("run", "--callback-timeout", "0", path)
        #expect(r.status == 0)
        let grownKiB = try #require(Int(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(grownKiB < 2048, "RSS grew by \(grownKiB) KiB over 300 000 raised errors")
    }

    @Test func exitCodeFromTheScript() throws {
        let path = try CommandRunner.script("exit.lua", "mw.every(1, print)\nmw.after(0, function() mw.exit(3) end)\n")
        #expect(try CommandRunner.run("run", path).status == 3)
    }

    @Test func jsonLogFormat() throws {
        let path = try CommandRunner.script("log.lua", "mw.log.warn('disk %d%% full', 93)\n")
        let r = try CommandRunner.run("run", "--log-format", "json", path)
        #expect(r.status == 0)
        let object = try JSONSerialization.jsonObject(with: Data(r.stderr.utf8)) as? [String: Any]
        #expect(object?["level"] as? String == "warning")
        #expect(object?["message"] as? String == "disk 93% full")
    }

    @Test func quietHidesInfo() throws {
        let path = try CommandRunner.script("quiet.lua", "mw.log.info('chatty')\nmw.log.error('bad')\n")
        let r = try CommandRunner.run("run", "-q", path)
        #expect(!r.stderr.contains("chatty"))
        #expect(r.stderr.contains("bad"))
    }

    @Test(arguments: [(SIGINT, Int32(130), "forever.lua"), (SIGTERM, Int32(143), "forever.lua"), (SIGTERM, Int32(143), "redial.lua")])
    func signalsEndTheScript(signal: Int32, expected: Int32, script: String) throws {
        // redial.lua opens a new connection whenever the last one closes, as the
        // Autobahn client does: the closes a signal causes must not keep it alive.
        let source = script == "forever.lua"
            ? "mw.every(0.5, function() end)\nprint('ready')\nio.stdout:flush()\n"
            : """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            print("ready") io.stdout:flush()
            while true do
              local c = mw.connect(s:url(), { reconnect = false })
              c:receive()
            end
            """
        let path = try CommandRunner.script(script, source)
        let (process, out, _) = CommandRunner.process(["run", path])
        try process.run()
        let deadline = ProcessDeadline(process, seconds: 120)
        defer { deadline.check("moonwire run \(script)") }
        // Wait for the script to say it runs, then signal it.
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("ready") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen.append(chunk)
        }
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        #expect(process.terminationStatus == expected)
    }
}
