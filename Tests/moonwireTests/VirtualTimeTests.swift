import Foundation
import Testing

/// `--virtual-time` and the per-file pragma, end to end: the example's heartbeat drop and
/// backoff (about a minute of timers) with exact timestamps, the same file in real time,
/// every reader of the clock (Fixtures/virtual_time), and `run --virtual-time`. Wall time
/// is checked only as a generous upper bound, or as a lower bound real timers guarantee.
@Suite(.timeLimit(.minutes(5))) struct VirtualTimeTests {
    static let example = "examples/tests/virtual_time_test.lua"
    static let fixture = "Tests/moonwireTests/Fixtures/virtual_time/clock_test.lua"

    private func timed(_ arguments: [String]) throws -> (CommandRunner.Result, Double) {
        let start = Date()
        let r = try CommandRunner.run(arguments)
        return (r, Date().timeIntervalSince(start))
    }

    @Test func exampleRunsOnTheVirtualClockWithExactTimestamps() throws {
        let (r, wall) = try timed(["test", "--virtual-time", Self.example])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.hasSuffix("1 passed, 0 failed\n"))
        // 61 s of timers; about 0.15 s here. Only a sanity bound: a loaded machine is slow.
        #expect(wall < 10)
        // The backoff happened on the virtual clock: 1, 2, 4, 8, 16 s.
        for delay in ["1.0", "2.0", "4.0", "8.0", "16.0"] {
            #expect(r.stderr.contains("retrying in \(delay) s"))
        }
    }

    @Test func theSameExampleStillPassesInRealTime() throws {
        let (r, wall) = try timed(["test", Self.example])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.hasSuffix("1 passed, 0 failed\n"))
        // Real timers never fire early: 61 units of 50 ms.
        #expect(wall >= 3.0)
    }

    /// The pragma alone switches the file; the waits add up to over an hour of virtual
    /// time against a 5 s per-test timeout, which stays real time.
    @Test func everyReaderOfTheClockIsVirtualUnderThePragma() throws {
        let r = try CommandRunner.run("test", "--timeout", "5", Self.fixture)
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.hasSuffix("8 passed, 0 failed\n"))
    }

    /// Several files at once on their own loops, each file many times: the same outcome
    /// every time (the jump rule does not depend on how busy the machine is).
    @Test func resultsAreTheSameRunAfterRun() throws {
        let r = try CommandRunner.run(
            "test", "--virtual-time", "--timeout", "5", "--repeat", "6", "--jobs", "4", Self.example, Self.fixture
        )
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.hasSuffix("54 passed, 0 failed\n"))
    }

    @Test func runTakesTheFlagToo() throws {
        let script = try CommandRunner.script("virtual_run.lua", """
            mw.spawn(function()
              mw.sleep(90)
              print(mw.virtual_time(), mw.now())
            end)
            """)
        let (r, wall) = try timed(["run", "--virtual-time", script])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "true\t90.0\n")
        #expect(wall < 30)
    }
}
