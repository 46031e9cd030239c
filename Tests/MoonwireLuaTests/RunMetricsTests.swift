import MoonwireCore
import Testing

@testable import MoonwireLua

/// The built-in metrics a script's connections record: the steps of each dial,
/// and how long `c:request` and `c:expect` waited.
@Suite(.timeLimit(.minutes(5))) struct RunMetricsTests {
    static func statistics(_ harness: ScriptHarness) throws -> [String: MetricStatistics] {
        let snapshot = try ScriptHarness.bounded(harness.runtime.eventLoop.submit { [runtime = harness.runtime] in runtime.metricsSnapshot() })
        return Dictionary(uniqueKeysWithValues: snapshot.statistics().map { ($0.key.display, $0) })
    }

    @Test func connectStepsAndExpectLatencyAreRecorded() throws {
        let harness = ScriptHarness()
        try harness.run("""
            local server = assert(mw.listen("ws://127.0.0.1:0/"))
            server:on_message(function(peer, msg) mw.after(0.02, function() peer:send("re:" .. msg) end) end)
            local c = mw.connect(server:url())
            assert(c:wait_open(5))
            connect = c:stats().connect
            assert(c:request("a", "^re:a$", 5))
            c:send("b")
            assert(c:expect("^re:b$", 5))
            -- re:c and re:d wait in the inbox while expect takes re:e; receive takes re:c,
            -- and expect finds re:d in the inbox.
            c:send("c"); c:send("d"); c:send("e")
            assert(c:expect("^re:e$", 5))
            assert(c:receive(5) == "re:c")
            from_inbox = c:expect("^re:d$", 0.5)
            c:close()
            server:close()
            """)
        #expect(try harness.global("from_inbox").text == "re:d")
        guard case .table(let connect) = try harness.global("connect") else {
            Issue.record("stats().connect is not a table")
            return
        }
        #expect(connect[.text("dns")]?.double == 0, "an IP address is not resolved")
        #expect(connect[.text("tls")] == nil)
        let steps = ["tcp", "handshake", "total"].compactMap { connect[.text($0)]?.double }
        #expect(steps.count == 3 && steps.allSatisfy { $0 > 0 }, "\(connect)")
        #expect(abs(steps[0] + steps[1] - steps[2]) < 1e-6, "the steps add up to the total: \(connect)")

        let s = try Self.statistics(harness)
        for name in ["connect_dns", "connect_tcp", "connect_handshake"] { #expect(s[name]?.count == 1, "\(name)") }
        #expect(s["connect_tls"]?.count == 0)
        #expect(s["connect_dns"]?.max == 0)
        #expect(s["request_latency"]?.count == 1)
        #expect((s["request_latency"]?.min ?? 0) >= 0.02)
        let expect = try #require(s["expect_latency"])
        #expect(expect.count == 3)
        // b and e waited for the server's 20 ms; d was in the inbox already.
        #expect((expect.max ?? 0) >= 0.02)
        #expect((expect.min ?? 1) < 0.02)
    }

    /// Inside mw.rate, the first c:expect of a call counts from when the call
    /// was meant to start: a start the loop was too busy to make on time shows.
    @Test func expectInsideRateCountsFromTheIntendedStart() throws {
        let harness = ScriptHarness()
        try harness.run("""
            local server = assert(mw.listen("ws://127.0.0.1:0/"))
            server:on_message(function(peer, msg) peer:send("re:" .. msg) end)
            local c = mw.connect(server:url())
            assert(c:wait_open(5))
            -- Starts at 0 and 0.1 s; the loop is busy from 0.05 s to 0.35 s, so the
            -- second starts about 0.25 s late (uncorrected, its expect would wait ~0).
            mw.after(0.05, function() local t = mw.now(); while mw.now() - t < 0.3 do end end)
            mw.rate { rate = 10, duration = 0.2, fn = function(n)
              c:send("x" .. n)
              assert(c:expect("^re:x" .. n .. "$", 5))
            end }
            c:close()
            server:close()
            """)
        let expect = try #require(try Self.statistics(harness)["expect_latency"])
        #expect(expect.count == 2)
        #expect((expect.max ?? 0) >= 0.2, "the second start waited about 0.25 s for the busy loop: \(expect.max ?? 0)")
    }

    @Test func everyDialThatOpensAddsItsSteps() throws {
        let harness = ScriptHarness()
        try harness.run("""
            local server = assert(mw.listen("ws://127.0.0.1:0/"))
            local c = mw.connect(server:url(), { reconnect = { initial = 0.01, jitter = 0 } })
            assert(c:wait_open(5))
            local opens = 0
            c:on_open(function()
              opens = opens + 1
              c:close()
              server:close()
            end)
            for _, peer in ipairs(server:peers()) do peer:abort() end
            """)
        let s = try Self.statistics(harness)
        #expect(s["connect_time"]?.count == 1, "the first open only")
        #expect(s["connect_tcp"]?.count == 2, "first dial and reconnect")
        #expect(s["connect_handshake"]?.count == 2)
        #expect(s["recover_time"]?.count == 1)
    }
}
