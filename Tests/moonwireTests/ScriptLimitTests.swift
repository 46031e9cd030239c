import Foundation
import Testing

/// The runtime survives its script: a callback that never returns, a script that
/// eats memory. Real processes, real sockets on loopback.
@Suite(.timeLimit(.minutes(5))) struct ScriptLimitTests {
    /// A server script whose on_message spins on "spin" and eats memory on "eat",
    /// and echoes everything else; two of its own clients check that it still serves.
    static let server = """
        local s = assert(mw.listen("ws://127.0.0.1:0/"))
        s:on_message(function(peer, msg)
          if msg == "spin" then
            local n = 0
            while true do n = n + 1 end
          elseif msg == "eat" then
            local t = {}
            for i = 1, 300000 do t[i] = string.rep("x", 1000) .. i end
            print("ate " .. #t)
          end
          peer:send("echo " .. msg)
        end)
        mw.spawn(function()
          local first = mw.connect(s:url(), { reconnect = false })
          local second = mw.connect(s:url(), { reconnect = false })
          assert(first:wait_open(5)) assert(second:wait_open(5))
          first:send(arg[1])
          second:send("hello")
          print((second:receive(30)))
          first:send("again")
          print((first:receive(30)))
          mw.exit(0)
        end)
        """

    /// Reads from `handle` until what was read contains `text`, or the end
    /// (a process that never writes it is killed by its deadline).
    static func read(_ handle: FileHandle, until text: String) -> String {
        var seen = ""
        while !seen.contains(text) {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        return seen
    }

    /// An endless on_message is reported once with its line while it spins, and
    /// SIGTERM / SIGINT still end the process with 143 / 130, after closing its
    /// peers cleanly (1001) in the meantime.
    @Test(arguments: [(SIGTERM, Int32(143)), (SIGINT, Int32(130))])
    func spinningCallbackIsReportedAndASignalEndsIt(signal: Int32, expected: Int32) throws {
        let path = try CommandRunner.script("spin_signal.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            s:on_message(function(peer, msg)
              if msg == "spin" then
                local n = 0
                while true do n = n + 1 end
              end
            end)
            print(s:url()) io.stdout:flush()
            """)
        let client = try CommandRunner.script("spin_client.lua", """
            local c = mw.connect(arg[1], { reconnect = false })
            c:on_open(function() c:send("spin") end)
            c:on_close(function(c, code, reason, info) print(code, reason, info.by, info.clean) end)
            """)
        let (server, out, err) = CommandRunner.process(["run", "--callback-timeout", "0", path])
        try server.run()
        let deadline = ProcessDeadline(server, seconds: 60)
        defer { deadline.check("moonwire run spin_signal.lua") }
        let url = Self.read(out.fileHandleForReading, until: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
        let (peer, peerOut, _) = CommandRunner.process(["run", client, url])
        try peer.run()
        let peerDeadline = ProcessDeadline(peer, seconds: 60)
        defer { peerDeadline.check("moonwire run spin_client.lua") }
        let seen = Self.read(err.fileHandleForReading, until: "a callback has run for")
        #expect(seen.contains("\(path):5: a callback has run for 1 s without returning to the event loop"))
        #expect(seen.contains("(never interrupted: callback timeout 0)"))
        let signalled = Date()
        kill(server.processIdentifier, signal)
        server.waitUntilExit()
        #expect(server.terminationStatus == expected)
        // It ends by closing its connections, not by waiting out a timeout.
        #expect(Date().timeIntervalSince(signalled) < 5)
        peer.waitUntilExit()
        let closed = String(decoding: peerOut.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(closed == "1001\tserver shutting down\tpeer\ttrue\n")
    }

    /// A callback whose pcall catches every interruption cannot be unwound: a
    /// second after SIGTERM the process ends anyway, with 143 and a line saying why.
    @Test func signalEndsACallbackThatCatchesItsInterruption() throws {
        let path = try CommandRunner.script("stubborn.lua", """
            mw.after(0, function()
              while true do
                pcall(function() while true do end end)
              end
            end)
            """)
        let (process, _, err) = CommandRunner.process(["run", "--callback-warning", "0.2", "--callback-timeout", "0", path])
        try process.run()
        let deadline = ProcessDeadline(process, seconds: 60)
        defer { deadline.check("moonwire run stubborn.lua") }
        _ = Self.read(err.fileHandleForReading, until: "a callback has run for")
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 143)
        let rest = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(rest.contains("\(path):3: the script caught the signal's interruption and kept running; moonwire exits with 143"))
    }

    /// Past --callback-timeout the callback is interrupted with an error at its
    /// line; with --keep-going the other connection was answered and the same
    /// connection is answered again afterwards.
    @Test func callbackTimeoutInterruptsAndKeepGoingServesOn() throws {
        let path = try CommandRunner.script("spin_timeout.lua", Self.server)
        let started = Date()
        let r = try CommandRunner.run(["run", "--keep-going", "--callback-timeout", "0.5", path, "spin"], deadline: 60)
        #expect(r.status == 0)
        #expect(r.stdout == "echo hello\necho again\n")
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("\(path):5: interrupted: the callback ran for") && $0.hasSuffix("without returning to the event loop (callback timeout 0.5 s)") })
        #expect(Date().timeIntervalSince(started) < 20)
        // Without --keep-going the same error ends the script with 1.
        let strict = try CommandRunner.run(["run", "--callback-timeout", "0.5", path, "spin"], deadline: 60)
        #expect(strict.status == 1)
        #expect(strict.stderr.contains("\(path):5: interrupted"))
    }

    /// A table that grows past --memory-limit is a Lua error at the line that grew
    /// it; the process stays up, the collector gives the memory back, and with
    /// --keep-going both connections are served afterwards.
    @Test func memoryLimitRaisesAtTheUsersLineAndKeepGoingSurvives() throws {
        let path = try CommandRunner.script("eat.lua", Self.server)
        let r = try CommandRunner.run(["run", "--keep-going", "--memory-limit", "64M", path, "eat"], deadline: 60)
        #expect(r.status == 0)
        #expect(r.stdout == "echo hello\necho again\n")
        #expect(r.stderr.contains("\(path):8: out of memory (Lua memory limit 64 MiB reached"))
        #expect(!r.stderr.contains("not enough memory"))
    }

    /// The same limit set by the script itself (mw.limits), hit in a coroutine:
    /// the error names the coroutine's line.
    @Test func memoryLimitFromTheScriptInACoroutine() throws {
        let path = try CommandRunner.script("eat_limits.lua", """
            print(mw.limits().callback_timeout, mw.limits().memory > 0)
            mw.limits { memory = 32 * 1024 * 1024 }
            mw.spawn(function()
              local t = {}
              for i = 1, 300000 do t[i] = string.rep("y", 1000) .. i end
            end)
            mw.after(0.01, function() print("still here") end)
            """)
        let r = try CommandRunner.run(["run", "--keep-going", path], deadline: 60)
        #expect(r.status == 0)
        #expect(r.stdout == "10.0\ttrue\nstill here\n")
        #expect(r.stderr.contains("\(path):5: out of memory (Lua memory limit 32 MiB reached"))
    }

    /// In `moonwire test` the limit's error ends that test as an error, named at
    /// the test, and the next test runs.
    @Test func memoryLimitInATestFile() throws {
        let path = try CommandRunner.script("memory_test.lua", """
            describe("memory", function()
              it("eats", function()
                local t = {}
                for i = 1, 1e7 do t[i] = string.rep("q", 1000) .. i end
              end)
              it("goes on", function() assert.are.equal(2, 1 + 1) end)
            end)
            """)
        let r = try CommandRunner.run(["test", "--memory-limit", "32M", path], deadline: 60)
        #expect(r.status == 1)
        #expect(r.stdout.contains("\(path):2: out of memory (Lua memory limit 32 MiB reached; --memory-limit, mw.limits)"))
        #expect(r.stdout.contains("PASS  memory goes on"))
        #expect(r.stdout.hasSuffix("1 passed, 0 failed, 1 errors\n"))
    }

    @Test func limitsExample() throws {
        let r = try CommandRunner.run(["run", "--keep-going", "examples/limits.lua"], deadline: 60)
        #expect(r.status == 0)
        #expect(r.stdout == "memory limit 16 MiB, callbacks interrupted after 1 s\nthe loop is free again\n")
        #expect(r.stderr.contains("examples/limits.lua:12: out of memory (Lua memory limit 16 MiB reached"))
        #expect(r.stderr.contains("examples/limits.lua:17: a callback has run for 0.2 s without returning to the event loop"))
        #expect(r.stderr.contains("examples/limits.lua:17: interrupted: the callback ran for"))
    }

    @Test func badLimitsAreUsageErrors() throws {
        let small = try CommandRunner.run("run", "--memory-limit", "1M", "examples/hello.lua")
        #expect(small.status == 2)
        #expect(small.stderr.contains("--memory-limit 1M is too small"))
        let negative = try CommandRunner.run("run", "--callback-timeout=-1", "examples/hello.lua")
        #expect(negative.status == 2)
        #expect(negative.stderr.contains("--callback-timeout must be a number of seconds, 0 or more"))
    }

    /// peer:close with a reason over 123 bytes raises the same misuse error as
    /// c:close, instead of returning and closing nothing.
    @Test func peerCloseRefusesALongReasonAsConnectionCloseDoes() throws {
        let path = try CommandRunner.script("peer_close.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            s:on_connect(function(peer)
              print(pcall(peer.close, peer, 1000, string.rep("x", 124)))
              print(pcall(peer.close, peer, 1005))
              peer:close(1000, string.rep("x", 123))
            end)
            mw.spawn(function()
              local c = mw.connect(s:url(), { reconnect = false })
              print(pcall(c.close, c, 1000, string.rep("x", 124)))
              local _, code = c:receive(5)
              print(code, c:state())
              mw.exit(0)
            end)
            """)
        let r = try CommandRunner.run(["run", path], deadline: 60)
        #expect(r.status == 0)
        #expect(r.stdout == """
            false\t\(path):9: bad argument #2 to 'c:close' (a close reason is at most 123 bytes)
            false\t\(path):3: bad argument #2 to 'peer:close' (a close reason is at most 123 bytes)
            false\t\(path):4: bad argument #1 to 'peer:close' (close code 1005 may not be sent (1000 to 1003, 1007 to 1014, or 3000 to 4999))
            closed\tclosed

            """)
    }
}
