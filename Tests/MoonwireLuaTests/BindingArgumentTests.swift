import Testing

@testable import MoonwireLua

/// Every binding is declared once (LuaFunctions) and reads its arguments by the
/// numbers its caller counts, so an error names the argument the user wrote. These
/// six named another before (#0 for s:reject_next's count and peer:pause, #1 for
/// reject_next's status, #2 for the value of m:add, h:observe and g:set).
@Suite(.timeLimit(.minutes(5))) struct BindingArgumentTests {
    @Test func errorsNumberArgumentsAsTheCallerCounts() throws {
        let harness = ScriptHarness()
        try harness.run("""
            errors = {}
            local function try(f, ...)
              local _, err = pcall(f, ...)
              errors[#errors + 1] = (tostring(err):gsub("^.-: bad", "bad"))
            end
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            try(s.reject_next, s, -1)
            try(s.reject_next, s, 1, 200)
            local m = mw.metrics.counter("things")
            try(m.add, m, -1)
            try(mw.metrics.histogram("lat").observe, mw.metrics.histogram("lat"), -1)
            try(mw.metrics.gauge("level").set, mw.metrics.gauge("level"), "high")
            s:on_connect(function(peer)
              try(peer.pause, peer, -1)
              peer:close()
            end)
            local c = mw.connect(s:url(), { reconnect = false })
            c:receive(5)
            at_line = select(2, pcall(function() m:add(-2) end))
            s:close()
            """)
        #expect(try harness.global("errors").sequence.compactMap(\.text) == [
            "bad argument #1 to 's:reject_next' (a count of 0 or more expected)",
            "bad argument #2 to 's:reject_next' (an HTTP status from 400 to 599 expected)",
            "bad argument #1 to 'm:add' (a counter only goes up; use a gauge for a value that goes down)",
            "bad argument #1 to 'h:observe' (a histogram records values of 0 or more)",
            "bad argument #1 to 'g:set' (number expected, got string)",
            "bad argument #1 to 'peer:pause' (seconds from 0 to 1e9 expected)",
        ])
        #expect(try harness.global("at_line").text == "test.lua:19: bad argument #1 to 'm:add' (a counter only goes up; use a gauge for a value that goes down)")
    }

    /// A method's `self` must be a userdata of its own class: another class's userdata,
    /// a userdata of Lua's own (a file) and a table are refused, before and after the
    /// class's metatable is first looked up.
    @Test func methodsRefuseAnotherClassAsSelf() throws {
        let harness = ScriptHarness()
        try harness.run("""
            errors = {}
            local function try(f, ...)
              local ok, err = pcall(f, ...)
              errors[#errors + 1] = ok and "ok" or (tostring(err):gsub("^.-: bad", "bad"))
            end
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            local c = mw.connect(s:url(), { reconnect = false })
            local t = mw.after(60, function() end)
            try(c.send, s, "x")
            try(c.send, io.stdout, "x")
            try(c.send, {}, "x")
            try(c.send, t, "x")
            try(c.send, c, "x")
            try(s.url, c)
            try(s.url, s)
            try(t.cancel, c)
            try(c.send, s, "x")
            t:cancel()
            c:close()
            s:close()
            """)
        let connectionExpected = "bad self to 'c:send' (a connection from mw.connect expected, got userdata)"
        #expect(try harness.global("errors").sequence.compactMap(\.text) == [
            connectionExpected,
            connectionExpected,
            "bad self to 'c:send' (a connection from mw.connect expected, got table)",
            connectionExpected,
            "ok",
            "bad self to 's:url' (server expected, got userdata)",
            "ok",
            "bad self to 'timer:cancel' (timer expected, got userdata)",
            connectionExpected,
        ])
    }
}
