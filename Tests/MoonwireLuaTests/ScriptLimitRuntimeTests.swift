import Testing

@testable import MoonwireLua

/// The guard of a Lua state (CLuaShim.c) seen from the runtime: the memory limit
/// refuses only where Lua can raise, its error names the user's line, and the
/// state goes on afterwards. These also run under AddressSanitizer (scripts/test.sh).
@Suite(.timeLimit(.minutes(5))) struct ScriptLimitRuntimeTests {
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
    /// Short-lived objects with finalizers are collected as fast as a script makes them
    /// (the collector runs in generational mode, as in lua5.4): in the incremental mode a
    /// million finalized tables piled up past 30 MiB before a cycle caught up.
    @Test func finalizedGarbageDoesNotPileUp() throws {
        let harness = ScriptHarness(limits: ScriptLimits(memory: 16 << 20))
        let code = try harness.run("""
            results = {}
            local mt = { __gc = function() end }
            for _ = 1, 1e6 do setmetatable({}, mt) end
            results[1] = collectgarbage("count") < 4 * 1024
            -- A timer's handle is such an object too.
            local n = 0
            local function again()
              n = n + 1
              if n < 50000 then mw.after(0, again) else results[2] = n end
            end
            again()
            """)
        #expect(code == 0)
        #expect(harness.reported.isEmpty, "\(harness.reported)")
        #expect(try harness.global("results").sequence == [.boolean(true), .integer(50_000)])
    }

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

    /// The count hook goes on whichever Lua thread runs when the callback has run
    /// too long: a coroutine of the script's own, resumed with coroutine.resume or
    /// called through coroutine.wrap, inside a callback, nested in each other.
    @Test func callbackTimeoutReachesTheScriptsOwnCoroutines() throws {
        let harness = ScriptHarness(keepGoing: true, limits: ScriptLimits(callbackWarning: 0, callbackTimeout: 0.2))
        let code = try harness.run("""
            mw.after(0, function()
              local spin = coroutine.create(function() while true do end end)
              resumed = { coroutine.resume(spin) }
              local wrapped = coroutine.wrap(function()
                local inner = coroutine.wrap(function() while true do end end)
                inner()
              end)
              wrapped_ok, wrapped_err = pcall(wrapped)
              mw.after(0, function() done = true end)
            end)
            """)
        #expect(code == 0)
        let resumed = try harness.global("resumed").sequence
        #expect(resumed.first == .boolean(false))
        #expect(resumed.last?.text?.hasPrefix("test.lua:2: interrupted: the callback ran for") == true)
        #expect(try harness.global("wrapped_ok") == .boolean(false))
        #expect(try harness.global("wrapped_err").text?.contains("test.lua:5: interrupted: the callback ran for") == true)
        #expect(try harness.global("done") == .boolean(true))
    }

    /// coroutine.resume and coroutine.wrap (the guard's own, which keep track of the
    /// running thread) answer as Lua's: values in and out, dead and running
    /// coroutines, errors with their position, to-be-closed variables, argument errors.
    @Test func coroutineFunctionsBehaveAsLuas() throws {
        let harness = ScriptHarness()
        _ = try harness.run("""
            local out = {}
            local function show(...) local t = table.pack(...) for i = 1, t.n do t[i] = tostring(t[i]) end out[#out + 1] = table.concat(t, " ", 1, t.n) end
            local co = coroutine.create(function(a, b) local c = coroutine.yield(a + b); error("boom " .. c) end)
            show(coroutine.resume(co, 1, 2))
            show(coroutine.resume(co, "x"))
            show(coroutine.resume(co))
            show(pcall(coroutine.resume, 42))
            show(coroutine.resume(coroutine.running()))
            local gen = coroutine.wrap(function(n) for i = 1, n do coroutine.yield(i) end return "done" end)
            show(gen(2)); show(gen()); show(gen()); show(pcall(gen))
            show(pcall(coroutine.wrap(function() error("inner") end)))
            local ok, e = pcall(coroutine.wrap(function() error({ code = 7 }) end)); show(ok, type(e), e.code)
            show(pcall(coroutine.wrap, 5))
            local closed = false
            local w = coroutine.wrap(function() local x <close> = setmetatable({}, { __close = function() closed = true end }); error("die") end)
            show(pcall(w)); show("closed", closed)
            show(select("#", coroutine.wrap(function() return table.unpack({}, 1, 300) end)()))
            lines = table.concat(out, "\\n")
            """)
        #expect(try harness.global("lines").text == """
            true 3
            false test.lua:3: boom x
            false cannot resume dead coroutine
            false bad argument #1 to 'coroutine.resume' (thread expected, got number)
            false cannot resume non-suspended coroutine
            1
            2
            done
            false cannot resume dead coroutine
            false test.lua:11: inner
            false table 7
            false bad argument #1 to 'coroutine.wrap' (function expected, got number)
            false test.lua:15: die
            closed true
            300
            """)
    }
}
