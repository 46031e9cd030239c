import Foundation
import Testing

/// `moonwire run --workers N`: N copies of a script, each in its own Lua state on its own loop.
@Suite(.timeLimit(.minutes(5))) struct RunWorkersTests {
    @Test func everyWorkerKnowsItsIndexAndTheCount() throws {
        let path = try CommandRunner.script("whoami.lua", "print(mw.worker, mw.workers)\n")
        let r = try CommandRunner.run("run", "--workers", "3", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.split(separator: "\n").sorted() == ["1\t3", "2\t3", "3\t3"])
        #expect(try CommandRunner.run("run", path).stdout == "1\t1\n")
    }

    /// examples/ping_pong.lua: worker 1 echoes, worker 2 times COUNT round trips, with
    /// busy polling (the default here: the suite may use both CPUs) and without; the
    /// times are not judged, only that every echo came back and the report was printed.
    @Test(arguments: [[], ["--busy-poll", "0"], ["--busy-poll", "200"]])
    func pingPongExample(polling: [String]) throws {
        let port = try MosquittoPeer.freePort()
        let r = try CommandRunner.run(["run", "--workers", "2"] + polling + ["examples/ping_pong.lua", "300", "\(port)"])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "300 round trips")
        #expect(lines.count == 2 && lines[1].hasPrefix("p50 ") && lines[1].contains(" us, p99 "))
    }

    @Test func busyPollOutOfRangeOrWithVirtualTimeIsAUsageError() throws {
        let path = try CommandRunner.script("nothing.lua", "\n")
        let negative = try CommandRunner.run("run", "--busy-poll=-1", path)
        #expect(negative.status == 2)
        #expect(negative.stderr.contains("--busy-poll must be 0 to 1000000 microseconds"))
        let virtual = try CommandRunner.run("run", "--busy-poll", "50", "--virtual-time", path)
        #expect(virtual.status == 2)
        #expect(virtual.stderr.contains("cannot go with --virtual-time"))
        #expect(try CommandRunner.run("run", "--busy-poll", "0", "--virtual-time", path).status == 0)
    }

    /// Each worker marks a file, then holds its thread without yielding until every
    /// worker's mark is there: workers sharing a thread, or running one after
    /// another, would wait for ever. Each then names the thread it ran on.
    @Test func workersRunAtOnceOnThreadsOfTheirOwn() throws {
        let dir = try Self.scratchFolder("threads")
        let path = try CommandRunner.script("together.lua", """
            local dir = mw.args[1]
            local function mark(i) return ("%s/worker-%d"):format(dir, i) end
            local function exists(file)
              local f = io.open(file)
              if f then f:close() end
              return f ~= nil
            end
            assert(io.open(mark(mw.worker), "w")):close()
            local deadline = mw.now() + 20
            for i = 1, mw.workers do
              while not exists(mark(i)) do
                if mw.now() > deadline then error("worker " .. i .. " never ran beside worker " .. mw.worker) end
              end
            end
            local thread = assert(io.open("/proc/thread-self/stat")):read("n")
            print(mw.worker, thread)
            """)
        let r = try CommandRunner.run("run", "--workers", "3", path, dir)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        #expect(lines.compactMap { $0.first }.sorted() == ["1", "2", "3"])
        #expect(Set(lines.map { $0.last }).count == 3, "three workers, three threads: \(r.stdout)")
    }

    /// Worker 3 ends first with 4, worker 2 after it with 3: worker order decides, not time.
    @Test func exitCodeIsTheFirstNonZeroInWorkerOrder() throws {
        let dir = try Self.scratchFolder("exit")
        let path = try CommandRunner.script("codes.lua", Self.waitForMark + """
            if mw.worker == 3 then
              assert(io.open(mark, "w")):close()
              mw.exit(4)
            elseif mw.worker == 2 then
              wait_for_mark()
              mw.exit(3)
            end
            print("worker " .. mw.worker .. " ended by itself")
            """)
        let r = try CommandRunner.run("run", "--workers", "3", path, dir)
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stdout == "worker 1 ended by itself\n")
        let zero = try CommandRunner.script("zero.lua", "mw.exit(0)\n")
        #expect(try CommandRunner.run("run", "--workers", "2", zero).status == 0)
    }

    /// An uncaught error ends its own worker only; the report names the worker.
    @Test func anErrorEndsOnlyItsWorker() throws {
        let dir = try Self.scratchFolder("error")
        let path = try CommandRunner.script("one_fails.lua", Self.waitForMark + """
            if mw.worker == 2 then
              assert(io.open(mark, "w")):close()
              error("boom")
            end
            wait_for_mark()
            print("worker " .. mw.worker .. " outlived worker 2")
            """)
        let r = try CommandRunner.run("run", "--workers", "3", path, dir)
        #expect(r.status == 1)
        #expect(r.stdout.split(separator: "\n").sorted() == ["worker 1 outlived worker 2", "worker 3 outlived worker 2"])
        #expect(r.stderr.hasPrefix("worker 2: \(path):12: boom\nstack traceback:\n"), "\(r.stderr)")
    }

    @Test func keepGoingHoldsForEachWorker() throws {
        let path = try CommandRunner.script("flaky_workers.lua", """
            local n = 0
            mw.every(0.005, function(t)
              n = n + 1
              if n == 3 then t:cancel() print("worker " .. mw.worker .. " done after " .. n) end
              if n < 3 then error("tick " .. n .. " failed") end
            end)
            """)
        let r = try CommandRunner.run("run", "--workers", "2", "--keep-going", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.split(separator: "\n").sorted() == ["worker 1 done after 3", "worker 2 done after 3"])
        for worker in 1...2 {
            for tick in 1...2 {
                #expect(r.stderr.contains("worker \(worker): \(path):5: tick \(tick) failed"))
            }
        }
    }

    @Test func logLinesNameTheirWorker() throws {
        let path = try CommandRunner.script("log_workers.lua", "mw.log.info('hello from %d', mw.worker)\n")
        let text = try CommandRunner.run("run", "--workers", "2", path)
        #expect(text.status == 0)
        #expect(text.stderr.contains("INFO  hello from 1 worker=1\n"))
        #expect(text.stderr.contains("INFO  hello from 2 worker=2\n"))
        let json = try CommandRunner.run("run", "--workers", "2", "--log-format", "json", path)
        let objects = try json.stderr.split(separator: "\n").map {
            try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.map { "\($0["message"] ?? "") \($0["worker"] ?? "")" }.sorted() == ["hello from 1 1", "hello from 2 2"])
        #expect(!(try CommandRunner.run("run", path).stderr.contains("worker")))
    }

    /// Four workers print as fast as they can into one pipe: every line arrives
    /// whole, from print (several arguments) and from io.write (one string a line).
    @Test func linesFromWorkersDoNotMix() throws {
        let path = try CommandRunner.script("chatty.lua", """
            for i = 1, 5000 do
              print("worker", mw.worker, "line", i)
              io.write(("worker %d io %d\\n"):format(mw.worker, i))
            end
            """)
        let r = try CommandRunner.run("run", "--workers", "4", path)
        #expect(r.status == 0, "\(r.stderr)")
        let expected = (1...4).flatMap { w in (1...5000).flatMap { i in ["worker\t\(w)\tline\t\(i)", "worker \(w) io \(i)"] } }
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        #expect(lines.count == expected.count)
        #expect(lines.sorted() == expected.sorted())
    }

    @Test(arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143))])
    func aSignalEndsEveryWorker(signal: Int32, expected: Int32) throws {
        let path = try CommandRunner.script("serve_workers.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            local c = mw.connect(s:url(), { reconnect = false })
            c:on_close(function(_, code) print(("worker %d closed %d"):format(mw.worker, code)) end)
            assert(c:wait_open(5))
            print("ready " .. mw.worker)
            """)
        let (process, out, _) = CommandRunner.process(["run", "--workers", "3", path])
        let ended = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in ended.signal() }
        try process.run()
        let deadline = ProcessDeadline(process, seconds: 120)
        defer { deadline.check("moonwire run --workers 3") }
        var seen = ""
        while seen.components(separatedBy: "ready ").count <= 3 {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        kill(process.processIdentifier, signal)
        if ended.wait(timeout: .now() + 30) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            Issue.record("moonwire --workers 3 still ran 30 s after signal \(signal)")
        }
        process.waitUntilExit()
        #expect(process.terminationStatus == expected)
        seen += String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let closes = seen.split(separator: "\n").filter { $0.contains("closed") }.sorted()
        #expect(closes == ["worker 1 closed 1001", "worker 2 closed 1001", "worker 3 closed 1001"])
    }

    @Test(arguments: ["0", "257", "-3", "many"])
    func aBadWorkerCountIsAUsageError(count: String) throws {
        let r = try CommandRunner.run("run", "--workers", count, "examples/hello.lua")
        #expect(r.status == 2)
        #expect(r.stdout == "")
        #expect(r.stderr.hasPrefix("moonwire: "))
        #expect(r.stderr.contains("--workers"))
        #expect(r.stderr.filter { $0 == "\n" }.count == 1)
        if count == "0" || count == "257" {
            #expect(r.stderr.contains("--workers must be 1 to 256"))
        }
    }

    /// Lua that defines `mark` (a file in mw.args[1]) and `wait_for_mark()`, which
    /// holds this worker's thread until another worker has made the file: 9 lines.
    private static let waitForMark = """
        local mark = mw.args[1] .. "/mark"
        local function wait_for_mark()
          local deadline = mw.now() + 20
          while true do
            local f = io.open(mark)
            if f then f:close() return end
            if mw.now() > deadline then error("no other worker made " .. mark) end
          end
        end

        """

    private static func scratchFolder(_ name: String) throws -> String {
        try Scratch.folder("workers-\(name)", fresh: true).path
    }
}
