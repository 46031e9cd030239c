import Testing

@testable import MoonwireLua

/// The guard of a Lua state (CLuaShim.c) seen from the runtime: the memory limit
/// refuses only where Lua can raise, its error names the user's line, and the
/// state goes on afterwards. These also run under AddressSanitizer (scripts/test.sh).
@Suite struct ScriptLimitRuntimeTests {
    /// A callback that grows a table past the limit fails at its line; what it
    /// built is collected, and the next callbacks run (and allocate) as before.
    @Test func memoryLimitErrorAtTheLineThenTheStateGoesOn() throws {
        let harness = ScriptHarness(keepGoing: true, limits: ScriptLimits(memory: 16 << 20))
        let code = try harness.run("""
            results = {}
            mw.after(0, function()
              local t = {}
              for i = 1, 1e7 do t[i] = string.rep("z", 500) .. i end
            end)
            mw.after(0.01, function()
              -- Swift functions building results at the limit must not abort.
              local parts = {}
              for i = 1, 1000 do parts[i] = mw.hex(string.rep("a", 100)) end
              results[1] = #table.concat(parts)
              results[2] = collectgarbage("count") < 16 * 1024
            end)
            """)
        #expect(code == 0)
        #expect(harness.reported.count == 1)
        #expect(harness.reported.first?.hasPrefix("test.lua:4: out of memory (Lua memory limit 16 MiB reached; --memory-limit, mw.limits)") == true)
        #expect(try harness.global("results").sequence == [.integer(200_000), .boolean(true)])
    }

    /// A pcall in the script catches the memory error like any other.
    @Test func pcallCatchesTheMemoryError() throws {
        let harness = ScriptHarness(limits: ScriptLimits(memory: 16 << 20))
        try harness.run("""
            local ok, err = pcall(function()
              local t = {}
              for i = 1, 1e7 do t[i] = {} end
            end)
            caught = { ok, err }
            """)
        #expect(harness.reported.isEmpty)
        #expect(try harness.global("caught").sequence == [.boolean(false), .text("not enough memory")])
    }

    @Test func limitsFromTheScript() throws {
        let harness = ScriptHarness(limits: ScriptLimits(callbackTimeout: 3))
        try harness.run("""
            before = mw.limits()
            after = mw.limits { memory = 0, callback_warning = 0.5, callback_timeout = 60 }
            ok, err = pcall(mw.limits, { memroy = 1 })
            small_ok, small_err = pcall(mw.limits, { memory = 1024 })
            """)
        guard case .table(let before) = try harness.global("before"), case .table(let after) = try harness.global("after") else {
            Issue.record("mw.limits did not return a table")
            return
        }
        #expect(before[.text("callback_timeout")] == .number(3))
        #expect(before[.text("callback_warning")] == .number(1))
        // The command line's 3 s wins over the script's 60.
        #expect(after[.text("callback_timeout")] == .number(3))
        #expect(after[.text("callback_warning")] == .number(0.5))
        #expect(after[.text("memory")] == .integer(0))
        #expect(try harness.global("err") == .text("test.lua:3: bad argument #1 to 'mw.limits' (unknown option 'limits.memroy')"))
        #expect(try harness.global("small_err") == .text("test.lua:4: bad argument #1 to 'mw.limits' (limits.memory: at least 8388608 bytes (8 MiB), or 0 for no limit)"))
    }

    /// Past the timeout an endless loop in a coroutine is an error at its line;
    /// a pcall around the loop catches it like any error, and the code after it runs.
    @Test func callbackTimeoutInterruptsACoroutine() throws {
        let harness = ScriptHarness(keepGoing: true, limits: ScriptLimits(callbackWarning: 0, callbackTimeout: 0.2))
        let code = try harness.run("""
            mw.spawn(function()
              caught = { pcall(function() while true do end end) }
              while true do end
            end)
            mw.after(0.01, function() done = true end)
            """)
        #expect(code == 0)
        let caught = try harness.global("caught").sequence
        #expect(caught.first == .boolean(false))
        #expect(caught.last?.text?.hasPrefix("test.lua:2: interrupted: the callback ran for") == true)
        #expect(harness.reported.count == 1)
        #expect(harness.reported.first?.hasPrefix("test.lua:3: interrupted: the callback ran for") == true)
        #expect(try harness.global("done") == .boolean(true))
    }
}
