import Testing

@testable import MoonwireLua

@Suite(.timeLimit(.minutes(5))) struct ScriptRuntimeTests {
    @Test func timersFireInDeadlineOrderTiesInCallOrder() throws {
        let harness = ScriptHarness()
        try harness.run("""
            order = {}
            local function mark(name) return function() order[#order + 1] = name end end
            mw.after(0.03, mark("c"))
            mw.after(0.01, mark("a1"))
            mw.after(0.02, mark("b"))
            mw.after(0.01, mark("a2"))
            mw.after(0, mark("first"))
            local cancelled = mw.after(0.015, mark("never"))
            cancelled:cancel()
            """)
        #expect(try harness.global("order").sequence.compactMap(\.text) == ["first", "a1", "a2", "b", "c"])
    }

    /// mw.every anchors tick n at start + n * interval: a late tick does not push
    /// the later ones back.
    @Test func everyHoldsItsCadenceWithoutDrift() throws {
        let harness = ScriptHarness()
        try harness.run("""
            ticks = {}
            local start = mw.now()
            mw.every(0.01, function(t)
              ticks[#ticks + 1] = mw.now() - start
              -- Every 20th tick stalls the loop for 2.5 intervals.
              local busy = mw.now() + (#ticks % 20 == 10 and 0.025 or 0.004)
              while mw.now() < busy do end
              if #ticks == 100 then t:cancel() end
            end)
            """)
        let ticks = try harness.global("ticks").sequence.compactMap(\.double)
        #expect(ticks.count == 100)
        for (i, t) in ticks.enumerated() {
            let due = Double(i + 1) * 0.01
            #expect(t >= due - 0.001, "tick \(i + 1) early: \(t)")
        }
        // With drift each tick would be due an interval after the one before it
        // fired: no two ticks could be less than 10 ms apart, however busy the
        // machine. Anchored, the tick after a stall is due at the next mark of the
        // grid, 5 ms later (and any late tick is followed by a shorter gap). This
        // holds on an idle and on a loaded machine alike; the exact schedule is
        // checked in virtual time by TimerSchedulerTests.
        let gaps = zip(ticks.dropFirst(), ticks).map { $0 - $1 }
        #expect(gaps.min()! < 0.009, "no tick came sooner than an interval after the one before: \(gaps)")
    }

    @Test func sleepInterleavesCoroutines() throws {
        let harness = ScriptHarness()
        try harness.run("""
            log = {}
            local function worker(name, offset)
              mw.sleep(offset)
              for i = 1, 3 do
                log[#log + 1] = name .. i
                mw.sleep(0.02)
              end
            end
            mw.spawn(worker, "a", 0)       -- even mw.sleep(0) yields: main goes on first
            mw.spawn(worker, "b", 0.01)
            log[#log + 1] = "main"
            """)
        #expect(try harness.global("log").sequence.compactMap(\.text) == ["main", "a1", "b1", "a2", "b2", "a3", "b3"])
    }

    @Test func sleepOutsideACoroutineRaisesAClearError() throws {
        let harness = ScriptHarness(keepGoing: true)
        try harness.run("""
            mw.after(0, function()
              local ok, err = pcall(mw.sleep, 0.1)
              message = err
            end)
            """)
        let message = try #require(try harness.global("message").text)
        #expect(message.contains("mw.sleep: only inside a coroutine"))
    }

    @Test func uncaughtErrorInACallbackEndsTheScriptWithOne() throws {
        let harness = ScriptHarness()
        let code = try harness.run("""
            mw.after(0.01, function() error("boom") end)
            mw.after(5, function() reached = true end)
            """)
        #expect(code == 1)
        #expect(harness.reported.count == 1)
        #expect(harness.reported.first?.hasPrefix("test.lua:1: boom\nstack traceback:") == true)
        #expect(try harness.global("reached") == .nil)
    }

    @Test func keepGoingReportsAndContinues() throws {
        let harness = ScriptHarness(keepGoing: true)
        let code = try harness.run("""
            count = 0
            mw.every(0.005, function(t)
              count = count + 1
              if count == 5 then t:cancel() end
              error({ code = count })
            end)
            """)
        #expect(code == 0)
        #expect(try harness.global("count") == .integer(5))
        #expect(harness.reported.count == 5)
        // A table error value is printed, after the line that raised it.
        #expect(harness.reported.first?.contains(":5: { code = 1 }") == true, "\(harness.reported)")
    }

    @Test func exitEndsAtOnceWithTheCode() throws {
        let harness = ScriptHarness()
        let code = try harness.run("""
            mw.spawn(function()
              mw.sleep(0.01)
              mw.exit(7)
              after_exit = true
            end)
            mw.after(10, function() end)
            """)
        #expect(code == 7)
        #expect(try harness.global("after_exit") == .nil)
    }

    /// More arguments than the 20 stack slots Lua promises used to be pushed past them.
    @Test func manyArgumentsReachTheScript() throws {
        let harness = ScriptHarness()
        let arguments = (1...500).map { "a\($0)" }
        try harness.run("n, last = select('#', ...), mw.args[#mw.args]", arguments: arguments)
        #expect(try harness.global("n") == .integer(500))
        #expect(try harness.global("last") == .text("a500"))
    }

    @Test func argumentsReachTheScript() throws {
        let harness = ScriptHarness()
        try harness.run("got = { n = select('#', ...), first = ..., args = mw.args, arg0 = arg[0] }", arguments: ["x", "y"])
        guard case .table(let got) = try harness.global("got") else {
            Issue.record("no table")
            return
        }
        #expect(got[.text("n")] == .integer(2))
        #expect(got[.text("first")] == .text("x"))
        #expect(got[.text("args")]?.sequence == [.text("x"), .text("y")])
        #expect(got[.text("arg0")] == .text("test.lua"))
    }

    @Test func jsonDecodeOfBadInputIsNilAndAReason() throws {
        let harness = ScriptHarness()
        try harness.run("""
            local v, err = mw.json.decode("{oops")
            result = { v == nil, err }
            encoded = mw.json.encode({ op = "login", tags = { "a", "b" } })
            decoded = mw.json.decode(encoded)
            """)
        let result = try harness.global("result").sequence
        #expect(result.first == .boolean(true))
        #expect(result.last?.text?.contains("object key (a string) expected at line 1 column 2") == true)
        guard case .table(let decoded) = try harness.global("decoded") else {
            Issue.record("no table")
            return
        }
        #expect(decoded[.text("op")] == .text("login"))
    }
}
