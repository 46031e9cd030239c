import Foundation
import Testing

/// Measured runs over real loopback sockets: the summary and its file, HDR
/// merges across shards, thresholds and exit codes, the open model and its
/// coordinated-omission correction, recover time, and the Prometheus scrape.
/// Every server is the script's own `mw.listen`, injecting delays and faults.
/// One test at a time: the timing tests should not compete with the shard
/// test's five processes.
@Suite(.serialized, .timeLimit(.minutes(5))) struct MetricsRunTests {
    /// A summary file's metrics by display name: the raw JSON objects.
    static func metrics(_ path: String) throws -> [String: [String: Any]] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let root = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let list = try #require(root["metrics"] as? [[String: Any]])
        var byName: [String: [String: Any]] = [:]
        for m in list {
            let name = m["name"] as! String
            let tags = (m["tags"] as? [String: String]) ?? [:]
            let key = tags.isEmpty ? name : name + "{" + tags.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }.joined(separator: ",") + "}"
            byName[key] = m
        }
        return byName
    }

    static func scratch(_ name: String) throws -> String {
        try Scratch.folder("metrics-\(name)", fresh: true).path
    }

    /// Whether a run of examples/load_rate.lua did what it should. Its
    /// `request_latency:p99 < 0.5` is a wall-clock threshold that a machine stalled for
    /// half a second (a loaded CI box) can miss, exiting 99: that miss, and only that
    /// one, still counts as a run; every count the tests read is checked as before.
    static func ranLoadRate(_ r: CommandRunner.Result) -> Bool {
        if r.status == 0 { return true }
        let failed = r.stdout.split(separator: "\n").filter { $0.hasPrefix("  FAIL  ") }
        return r.status == 99 && failed.count == 1 && failed[0].hasPrefix("  FAIL  request_latency:p99 < 0.5  (")
    }

    /// The verdict examples/load_rate.lua's latency threshold got (see `ranLoadRate`).
    static let loadRateLatencyVerdict = #/(pass|FAIL)  request_latency:p99 < 0\.5  \(/#

    /// The summary table's cell for `metric` in `column`, in seconds.
    static func cell(_ table: String, _ metric: String, _ column: String) -> Double? {
        let lines = table.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        guard let header = lines.first(where: { $0.first == "metric" }), let col = header.firstIndex(of: column),
            let row = lines.first(where: { $0.first == metric }), col < row.count
        else { return nil }
        let text = row[col]
        for (suffix, scale) in [("us", 1e-6), ("ms", 1e-3), ("s", 1.0)] where text.hasSuffix(suffix) {
            return Double(text.dropLast(suffix.count)).map { $0 * scale }
        }
        return Double(text)
    }

    /// 200 requests at 100/s; the server answers every fifth after 1 s, the
    /// rest after 0.5 s: p50 is 0.5 s, p99 is 1 s, within 5 %. The delays are
    /// long enough to dominate what a loaded machine adds (a loop a few ms late).
    @Test func percentilesMatchInjectedDelays() throws {
        let path = try CommandRunner.script("delays.lua", """
            local server = assert(mw.listen("ws://127.0.0.1:0/"))
            server:on_message(function(peer, msg)
              local n = tonumber(msg)
              mw.after(n % 5 == 0 and 1 or 0.5, function() peer:send(msg) end)
            end)
            local c = mw.connect(server:url())
            assert(c:wait_open(5))
            local r = mw.rate { rate = 100, duration = 2, fn = function(n)
              local id = tostring(n)
              assert(c:request(id, function(m) return m == id end, 10))
            end }
            assert(r.missed == 0)
            c:close()
            server:close()
            """)
        let dir = try Self.scratch("delays")
        let r = try CommandRunner.run(["run", "--summary", "--summary-json", dir + "/s.json", path])
        #expect(r.status == 0, "\(r.stderr)")
        let p50 = try #require(Self.cell(r.stdout, "request_latency", "p50"), "\(r.stdout)")
        let p99 = try #require(Self.cell(r.stdout, "request_latency", "p99"), "\(r.stdout)")
        #expect(p50 >= 0.5 * 0.999 && p50 <= 0.5 * 1.05, "p50 \(p50)\n\(r.stdout)")
        #expect(p99 >= 1 * 0.999 && p99 <= 1 * 1.05, "p99 \(p99)\n\(r.stdout)")
        #expect(Self.cell(r.stdout, "request_latency", "count") == 200)
        let m = try Self.metrics(dir + "/s.json")
        #expect(m["messages_out"]?["value"] as? Double == 200)
        #expect(m["messages_in"]?["value"] as? Double == 200)
        #expect(m["iterations"]?["value"] as? Double == 200)
    }

    /// One call at a time (max_in_flight = 1) at 50/s; the server stalls 1 s
    /// on the 50th request (or the first after it). Uncorrected, the stall is one slow sample among a
    /// hundred fast ones; corrected, every start it kept from happening counts
    /// the time it waited, and p90 shows the stall.
    @Test func coordinatedOmissionIsCorrected() throws {
        let path = try CommandRunner.script("stall.lua", """
            local server = assert(mw.listen("ws://127.0.0.1:0/"))
            -- The first request from the 50th on: on a busy machine the 50th start itself may be missed.
            local stalled = false
            server:on_message(function(peer, msg)
              if not stalled and tonumber(msg) >= 50 then
                stalled = true
                mw.after(1, function() peer:send(msg) end)
              else
                peer:send(msg)
              end
            end)
            local c = mw.connect(server:url())
            assert(c:wait_open(5))
            local r = mw.rate { rate = 50, duration = 3, max_in_flight = 1, fn = function(n)
              local id = tostring(n)
              assert(c:request(id, function(m) return m == id end, 10))
            end }
            print("missed", r.missed)
            c:close()
            server:close()
            """)
        let dir = try Self.scratch("stall")
        let r = try CommandRunner.run(["run", "--summary", "--summary-json", dir + "/s.json", path])
        #expect(r.status == 0, "\(r.stderr)")
        let corrected = try #require(Self.cell(r.stdout, "iteration_duration", "p90"), "\(r.stdout)")
        let raw = try #require(Self.cell(r.stdout, "iteration_duration_uncorrected", "p90"), "\(r.stdout)")
        let rawMax = try #require(Self.cell(r.stdout, "iteration_duration_uncorrected", "max"))
        #expect(rawMax >= 1.0, "the stalled call itself took the second\n\(r.stdout)")
        #expect(raw < 0.2, "uncorrected, the stall hides: p90 \(raw)\n\(r.stdout)")
        #expect(corrected > 0.4, "corrected, it shows: p90 \(corrected)\n\(r.stdout)")
        let missed = try #require(Self.metrics(dir + "/s.json")["missed_starts"]?["value"] as? Double)
        #expect(missed >= 40, "about 50 starts fall in the stall: \(missed)")
        #expect(r.stdout.contains("missed\t\(Int(missed))"))
    }

    /// The server drops the connection (abort, no close frame) after the 20th
    /// message; the client goes on sending every 20 ms, its queue holds what it
    /// sends while reconnecting, and the server ends up with all 60, once each.
    @Test func forcedDisconnectShowsRecoverTimeAndLosesNothing() throws {
        let path = try CommandRunner.script("recover.lua", """
            local server = assert(mw.listen("ws://127.0.0.1:0/"))
            local seen, count, aborted = {}, 0, false
            server:on_message(function(peer, msg)
              if not seen[msg] then seen[msg] = true; count = count + 1 end
              if msg == "20" and not aborted then aborted = true; peer:abort() end
              if count == 60 then mw.exit(0) end
            end)
            local c = mw.connect(server:url(), { reconnect = { initial = 0.1, jitter = 0 } })
            assert(c:wait_open(5))
            mw.thresholds { ["dropped:count"] = "== 0", ["recover_time:count"] = "== 1", ["reconnects:count"] = "== 1" }
            for i = 1, 60 do
              assert(c:send(tostring(i)))
              mw.sleep(0.02)
            end
            mw.after(10, function() print("only", count); mw.exit(1) end)
            """)
        let dir = try Self.scratch("recover")
        let r = try CommandRunner.run(["run", "--summary", "--summary-json", dir + "/s.json", path])
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("pass  dropped:count == 0"), "\(r.stdout)")
        let m = try Self.metrics(dir + "/s.json")
        #expect(m["reconnects"]?["value"] as? Double == 1)
        #expect(m["dropped"]?["value"] as? Double == 0)
        let recover = try #require(Self.cell(r.stdout, "recover_time", "max"), "\(r.stdout)")
        #expect(recover >= 0.1, "at least the reconnect delay: \(recover)")
        #expect(m["closes{code=\"1006\"}"] != nil, "\(m.keys.sorted())")
    }

    @Test func thresholdsFlipTheExitCode() throws {
        let path = try CommandRunner.script("thresholds.lua", """
            local h = mw.metrics.histogram("work_seconds")
            for i = 1, 100 do h:observe(i / 1000) end
            mw.metrics.counter("jobs", { queue = "a" }):add(3)
            mw.thresholds { ["work_seconds:p50"] = "< " .. (mw.args[1] or "1") }
            """)
        var r = try CommandRunner.run(["run", path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("pass  work_seconds:p50 < 1"), "\(r.stdout)")
        r = try CommandRunner.run(["run", path, "0.01"])
        #expect(r.status == 99, "\(r.stdout) \(r.stderr)")
        #expect(r.stdout.contains("FAIL  work_seconds:p50 < 0.01"), "\(r.stdout)")
        r = try CommandRunner.run(["run", "--threshold", "jobs:count>=4", path])
        #expect(r.status == 99)
        #expect(r.stdout.contains("FAIL  jobs:count >= 4  (3)"), "\(r.stdout)")
        r = try CommandRunner.run(["run", "--threshold", "jobs:count == 3", path])
        #expect(r.status == 0, "\(r.stdout)")
        // Mistakes: exit 2, in words.
        r = try CommandRunner.run(["run", "--threshold", "nosuch:p99 < 1", path])
        #expect(r.status == 2)
        #expect(r.stderr.contains("no metric 'nosuch' in this run"), "\(r.stderr)")
        r = try CommandRunner.run(["run", "--threshold", "jobs:p99 about 1", path])
        #expect(r.status == 2)
        #expect(r.stderr.contains("a comparison and a number"), "\(r.stderr)")
        r = try CommandRunner.run(["run", "--threshold", "jobs:p999x < 1", path])
        #expect(r.status == 2)
        #expect(r.stderr.contains("unknown statistic"), "\(r.stderr)")
        let bad = try CommandRunner.script("badthreshold.lua", "mw.thresholds { ['x:p99'] = '<< 1' }\n")
        r = try CommandRunner.run(["run", bad])
        #expect(r.status == 1)
        #expect(r.stderr.contains("badthreshold.lua:1:"), "\(r.stderr)")
        let badName = try CommandRunner.script("badname.lua", "\nmw.metrics.counter('bad name')\n")
        r = try CommandRunner.run(["run", badName])
        #expect(r.status == 1)
        #expect(r.stderr.contains("badname.lua:2:") && r.stderr.contains("not a Prometheus name"), "\(r.stderr)")
    }

    @Test func badShardsAreUsageErrors() throws {
        let path = try CommandRunner.script("noop.lua", "\n")
        for shard in ["3/2", "0/0", "1", "a/b", "0/4"] {
            let r = try CommandRunner.run(["run", "--shard", shard, path])
            #expect(r.status == 2, "\(shard)")
            #expect(r.stderr.contains("is not a shard"), "\(r.stderr)")
        }
    }

    /// Four processes, shard i/4 each, merged: the same totals and the same
    /// histogram, bucket for bucket, as one process running it all.
    @Test func fourShardsMergeToOneProcessExactly() throws {
        let path = try CommandRunner.script("sharded.lua", """
            local h = mw.metrics.histogram("value_seconds")
            local n_total = mw.metrics.counter("numbers_total")
            mw.rate { rate = 200, duration = 1, fn = function(n)
              h:observe((n * 7919 % 1000) / 1000)
              n_total:add(n)
            end }
            """)
        let dir = try Self.scratch("shards")
        var procs: [(Process, Pipe, Pipe)] = []
        for i in 1...4 {
            procs.append(CommandRunner.process(["run", "--shard", "\(i)/4", "--summary-json", "\(dir)/part\(i).json", path]))
        }
        procs.append(CommandRunner.process(["run", "--summary-json", "\(dir)/one.json", path]))
        for p in procs { try p.0.run() }
        for p in procs {
            p.0.waitUntilExit()
            #expect(p.0.terminationStatus == 0)
        }
        let merge = try CommandRunner.run(["metrics", "merge", "-o", "\(dir)/merged.json"] + (1...4).map { "\(dir)/part\($0).json" })
        #expect(merge.status == 0, "\(merge.stderr)")
        #expect(merge.stdout.contains("shards 1/4 2/4 3/4 4/4"), "\(merge.stdout)")
        let merged = try Self.metrics("\(dir)/merged.json")
        let one = try Self.metrics("\(dir)/one.json")
        for name in ["iterations", "numbers_total"] {
            #expect(merged[name]?["value"] as? Double == one[name]?["value"] as? Double, "\(name)")
        }
        #expect(one["iterations"]?["value"] as? Double == 200)
        #expect(one["numbers_total"]?["value"] as? Double == Double(200 * 201 / 2))
        let a = try #require(merged["value_seconds"]?["histogram"] as? [String: Any])
        let b = try #require(one["value_seconds"]?["histogram"] as? [String: Any])
        #expect(NSDictionary(dictionary: a).isEqual(to: b), "merged histogram differs from one process's")
        let part = try Self.metrics("\(dir)/part2.json")
        #expect(part["iterations"]?["value"] as? Double == 50)
        // The same through the merge's table: every percentile equal.
        let single = try CommandRunner.run(["metrics", "merge", "\(dir)/one.json"])
        for column in ["min", "p50", "p90", "p99", "p99.9", "max"] {
            #expect(Self.cell(merge.stdout, "value_seconds", column) == Self.cell(single.stdout, "value_seconds", column), "\(column)")
        }
    }

    /// Four shards started one after another (each once the one before is up),
    /// with one --start-at: each records when its schedule actually began, by its
    /// own clock, and those instants are within 50 ms; the merge says how far
    /// apart they were, and the run's duration counts from the start, not the wait.
    @Test func shardsStartTogetherWithStartAt() throws {
        let path = try CommandRunner.script("together.lua", """
            print("ready")
            local r = mw.rate { rate = 40, duration = 0.5, fn = function(n) end }
            print("started " .. r.started)
            """)
        let dir = try Self.scratch("together")
        // Far enough ahead for four debug processes to come up on a busy machine.
        let startAt = Date().timeIntervalSince1970 + 6
        var procs: [(Process, Pipe, Pipe)] = []
        defer { for p in procs where p.0.isRunning { p.0.terminate() } }
        for i in 1...4 {
            let p = CommandRunner.process(["run", "--shard", "\(i)/4", "--start-at", String(format: "%.3f", startAt), "--summary-json", dir + "/", path])
            try p.0.run()
            procs.append(p)
            var out = ""
            while !out.contains("ready") {
                let chunk = p.1.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                out += String(decoding: chunk, as: UTF8.self)
            }
            #expect(out.contains("ready"), "shard \(i): \(out)")
        }
        for (i, p) in procs.enumerated() {
            let rest = String(decoding: p.1.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let err = String(decoding: p.2.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.0.waitUntilExit()
            #expect(p.0.terminationStatus == 0, "\(err)")
            #expect(rest.contains("started 5"), "shard \(i + 1): \(rest)")
            #expect(!err.contains("--start-at was"), "shard \(i + 1) began late: \(err)")
        }
        var starts: [Double] = []
        for i in 1...4 {
            let data = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/shard-\(i)-of-4.json"))
            let root = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let list = try #require(root["starts"] as? [[String: Any]])
            let at = try #require(list.first?["at"] as? Double)
            #expect((list.first?["shard"] as? [String: Int])?["index"] == i)
            #expect(at >= startAt - 0.001, "shard \(i) began \(startAt - at) s before --start-at")
            #expect(try #require(root["duration"] as? Double) < 2, "the duration counts from --start-at")
            starts.append(at)
        }
        let spread = starts.max()! - starts.min()!
        #expect(spread < 0.05, "the shards began \(spread) s apart: \(starts)")
        let merge = try CommandRunner.run(["metrics", "merge", dir, "-o", "\(dir)/merged.json"])
        #expect(merge.status == 0, "\(merge.stderr)")
        #expect(merge.stdout.contains("apart"), "\(merge.stdout)")
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/merged.json"))
        let merged = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let reported = try #require(merged["startSpread"] as? Double)
        #expect(abs(reported - spread) < 1e-6, "merge says \(reported), the files \(spread)")
        #expect((merged["starts"] as? [Any])?.count == 4)
    }

    /// Slurm's job-array variables make the shard (and name its file); a task past
    /// the array's count and a bad --start-at are usage errors.
    @Test func shardFromSlurmArrayAndBadStarts() throws {
        let path = try CommandRunner.script("arraytask.lua", "mw.rate { rate = 40, duration = 0.1, fn = function() end }\nprint(mw.shard.index .. '/' .. mw.shard.count)\n")
        let dir = try Self.scratch("array")
        let array = ["SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_MAX": "9", "SLURM_ARRAY_TASK_STEP": "2", "SLURM_ARRAY_TASK_COUNT": "4"]
        var r = try CommandRunner.run(["run", "--summary-json", dir + "/", path], environment: array)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("2/4"), "\(r.stdout)")
        #expect(FileManager.default.fileExists(atPath: "\(dir)/shard-2-of-4.json"))
        // --shard wins over the engine's variables.
        r = try CommandRunner.run(["run", "--shard", "1/2", path], environment: array)
        #expect(r.stdout.contains("1/2"), "\(r.stdout)")
        r = try CommandRunner.run(["run", path], environment: array.merging(["SLURM_ARRAY_TASK_ID": "11"]) { $1 })
        #expect(r.status == 2)
        #expect(r.stderr.contains("SLURM_ARRAY_TASK_ID 11 is task 5 of the array from 3, but SLURM_ARRAY_TASK_COUNT is 4"), "\(r.stderr)")
        for bad in ["tomorrow", "1764194400000", "+5x"] {
            r = try CommandRunner.run(["run", "--start-at", bad, path])
            #expect(r.status == 2, "\(bad)")
            #expect(r.stderr.contains("--start-at"), "\(r.stderr)")
        }
        r = try CommandRunner.run(["run", "--virtual-time", "--start-at", "+1s", path])
        #expect(r.status == 2)
        // A merge of a directory missing a shard says which.
        r = try CommandRunner.run(["metrics", "merge", dir])
        #expect(r.status == 2)
        #expect(r.stderr.contains("shards 1/4, 3/4, 4/4 missing"), "\(r.stderr)")
    }

    /// mw.vus: count sessions over the ramp, each keeping its vu table across
    /// iterations; a shard runs its share of the sessions.
    @Test func closedModelKeepsSessionsAcrossIterations() throws {
        let path = try CommandRunner.script("vus.lua", """
            local ids = {}
            mw.vus { count = 4, ramp = 0.1, iterations = 3, fn = function(vu)
              mw.sleep(0.01)
              vu.seen = (vu.seen or 0) + 1
              if vu.iteration == 3 then ids[#ids + 1] = vu.id .. ":" .. vu.seen end
            end }
            table.sort(ids)
            print(table.concat(ids, " "))
            """)
        var r = try CommandRunner.run(["run", "--summary", path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("1:3 2:3 3:3 4:3\n"), "\(r.stdout)")
        #expect(Self.cell(r.stdout, "iterations", "count") == 12, "\(r.stdout)")
        r = try CommandRunner.run(["run", "--summary", "--shard", "2/4", path])
        #expect(r.stdout.hasPrefix("2:3\n"), "\(r.stdout)")
        #expect(Self.cell(r.stdout, "iterations", "count") == 3, "\(r.stdout)")
    }

    /// An error in a call started by mw.rate is reported at the script's line;
    /// with --keep-going the schedule goes on and mw.rate still returns.
    @Test func errorsInRateCallsPointAtTheScript() throws {
        let path = try CommandRunner.script("rate_error.lua", """
            local r = mw.rate { rate = 20, duration = 0.2, fn = function(n)
              if n == 2 then error("boom at " .. n) end
            end }
            print("started", r.started)
            mw.rate { rate = -1, duration = 1, fn = print }
            """)
        var r = try CommandRunner.run(["run", path])
        #expect(r.status == 1)
        #expect(r.stderr.hasPrefix("\(path):2: boom at 2"), "\(r.stderr)")
        r = try CommandRunner.run(["run", "--keep-going", path])
        #expect(r.status == 0, "--keep-going logs the errors and goes on")
        #expect(r.stdout == "started\t4\n", "\(r.stdout)")
        #expect(r.stderr.contains("\(path):5: mw.rate: rate: a number of at least 0 expected, got -1"), "\(r.stderr)")
    }

    /// --workers 4 splits mw.rate among the workers and prints one merged summary.
    @Test func workersMergeIntoOneSummary() throws {
        let path = try CommandRunner.script("workers_rate.lua", """
            mw.rate { rate = 100, duration = 1, fn = function() mw.metrics.counter("done"):inc() end }
            """)
        let r = try CommandRunner.run(["run", "--workers", "4", "--summary", path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Self.cell(r.stdout, "done", "count") == 100, "\(r.stdout)")
        #expect(Self.cell(r.stdout, "iterations", "count") == 100, "\(r.stdout)")
    }

    /// /metrics scraped while the run goes on parses with prometheus-client's
    /// text-format parser; the script ends when the scrape has been checked.
    @Test func metricsEndpointParsesAsPrometheusText() throws {
        let python = try #require(Self.venvPython(), "Tests/MoonwireCoreTests/Peers/setup_venv.sh has not run")
        let dir = try Self.scratch("prom")
        let marker = dir + "/scraped"
        let path = try CommandRunner.script("scraped.lua", """
            local server = assert(mw.listen("ws://127.0.0.1:0/"))
            server:on_message(function(peer, msg) peer:send(msg) end)
            local c = mw.connect(server:url())
            assert(c:wait_open(5))
            assert(c:request("hello", "hello", 5))
            mw.metrics.histogram("job_seconds", { kind = "x" }):observe(0.25)
            local t
            t = mw.every(0.05, function()
              local f = io.open(mw.args[1])
              if f then f:close(); t:cancel(); c:close(); server:close() end
            end)
            """)
        let (process, _, err) = CommandRunner.process(["run", "--metrics-port", "0", "--shard", "2/3", path, marker])
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        var stderrText = ""
        var url: String?
        while url == nil {
            let chunk = err.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            stderrText += String(decoding: chunk, as: UTF8.self)
            if let range = stderrText.range(of: #"http://[0-9.:]+/metrics"#, options: .regularExpression) { url = String(stderrText[range]) }
        }
        let endpoint = try #require(url, "\(stderrText)")
        let check = """
            import sys, urllib.request
            from prometheus_client.parser import text_string_to_metric_families
            text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
            fams = {f.name: f for f in text_string_to_metric_families(text)}
            for f in sorted(fams): print(f, fams[f].type)
            req = fams["moonwire_request_latency_seconds"]
            assert req.type == "histogram", req.type
            count = [s for s in req.samples if s.name.endswith("_count")][0]
            assert count.value == 1 and count.labels == {"shard": "2/3"}, count
            inf = [s for s in req.samples if s.labels.get("le") == "+Inf"][0]
            assert inf.value == 1, inf
            job = fams["moonwire_job_seconds"]
            below = [s for s in job.samples if s.labels.get("le") == "0.1"][0]
            above = [s for s in job.samples if s.labels.get("le") == "0.25"][0]
            assert below.value == 0 and above.value == 1 and above.labels["kind"] == "x", (below, above)
            quantiles = fams["moonwire_job_quantile_seconds"]
            assert quantiles.type == "gauge", quantiles.type
            q = [s for s in quantiles.samples if s.labels.get("quantile") == "0.5"][0]
            assert abs(q.value - 0.25) < 0.001 and q.labels["kind"] == "x" and q.labels["shard"] == "2/3", q
            assert fams["moonwire_messages_out"].type == "counter"
            assert fams["moonwire_connect_tcp_seconds"].type == "histogram"
            print("parsed", len(fams))
            """
        let r = try Self.runPython(python, check, endpoint)
        try Data().write(to: URL(fileURLWithPath: marker))
        process.waitUntilExit()
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("parsed"), "\(r.stdout)")
        #expect(process.terminationStatus == 0)
    }

    @Test func busyMetricsPortIsAUsageError() throws {
        let blocker = try CommandRunner.script("blocker.lua", "\n")
        let busy = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(busy) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(busy, $0, len) } }
        listen(busy, 1)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(busy, $0, &len) } }
        let port = UInt16(bigEndian: addr.sin_port)
        let r = try CommandRunner.run(["run", "--metrics-port", "\(port)", blocker])
        #expect(r.status == 2)
        #expect(r.stderr.contains("--metrics-port \(port): cannot listen"), "\(r.stderr)")
    }

    @Test func jsonlWritesSnapshotsEverySecond() throws {
        let dir = try Self.scratch("jsonl")
        let path = try CommandRunner.script("jsonl.lua", """
            local file = mw.args[1]
            mw.metrics.counter("ticks"):inc()
            -- Ends once the second snapshot line is in the file: no fixed wait.
            local t
            t = mw.every(0.05, function()
              local f = io.open(file)
              local lines = 0
              if f then for _ in f:lines() do lines = lines + 1 end f:close() end
              if lines >= 2 then t:cancel() end
            end)
            """)
        let r = try CommandRunner.run(["run", "--metrics-jsonl", dir + "/m.jsonl", path, dir + "/m.jsonl"])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = try String(contentsOfFile: dir + "/m.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(lines.count >= 2)
        let first = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        let metrics = try #require(first["metrics"] as? [String: [String: Double]])
        #expect(metrics["ticks"]?["count"] == 1)
        #expect(first["t"] as? Double ?? 0 >= 0.9)
    }

    @Test func loadRateExampleRuns() throws {
        let dir = try Self.scratch("example")
        let r = try CommandRunner.run(["run", "--summary", "--summary-json", dir + "/s.json", "examples/load_rate.lua", "-", "40", "0.5"])
        #expect(Self.ranLoadRate(r), "\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("started 20, missed 0 (shard 1/1)"), "\(r.stdout)")
        #expect(r.stdout.contains("connected in ") && r.stdout.contains(": dns 0.00 ms, tcp "), "\(r.stdout)")
        #expect(Self.cell(r.stdout, "connect_handshake", "count") == 1, "\(r.stdout)")
        #expect(r.stdout.contains(Self.loadRateLatencyVerdict), "\(r.stdout)")
        #expect(Self.cell(r.stdout, "answers{kind=\"echo\"}", "count") == 20, "\(r.stdout)")
    }

    /// examples/load_vus.lua: each VU's connection is closed when its time is up
    /// (1000), so the run ends by itself with the server it closes, and mw.vus
    /// tells what it did.
    @Test func loadVusExampleEndsOnItsOwn() throws {
        let r = try CommandRunner.run(["run", "--summary", "examples/load_vus.lua", "-", "4", "0.5"], deadline: 30)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        let line = r.stdout.split(separator: "\n").first { $0.hasPrefix("4 VUs, ") }
        #expect(line?.hasSuffix(" iterations, 4 connections closed when their VU ended") == true, "\(r.stdout)")
        #expect(Self.cell(r.stdout, "closes{code=\"1000\"}", "count") == 4, "\(r.stdout)")
        #expect(Self.cell(r.stdout, "iterations", "count") ?? 0 >= 4, "\(r.stdout)")
        #expect(r.stdout.contains("pass  errors:count == 0"), "\(r.stdout)")
    }

    /// A session that returns at once (no duration) ends too: what it opened is closed
    /// when fn returns, also a connection opened in a coroutine the VU spawned.
    @Test func vusCloseWhatTheirSessionOpened() throws {
        let path = try CommandRunner.script("vus_close.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            local r = mw.vus { count = 3, fn = function(vu)
              local c = mw.connect(s:url())
              assert(c:wait_open(5))
              mw.spawn(function() mw.connect(s:url()) end)
            end }
            print(r.started, r.iterations, r.closed)
            s:close()
            """)
        let r = try CommandRunner.run(["run", path], deadline: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "3\t3\t6\n", "\(r.stderr)")
    }

    /// --summary-json holds each metric's unit and figures beside the HDR data: jq
    /// reads the p99 the table prints, and metrics merge -o computes them again
    /// from the merged data.
    @Test func summaryJSONFiguresReadWithJq() throws {
        let dir = try Self.scratch("figures")
        let r = try CommandRunner.run(["run", "--summary", "--summary-json", dir + "/s.json", "examples/load_rate.lua", "-", "40", "0.5"])
        #expect(Self.ranLoadRate(r), "\(r.stdout)\n\(r.stderr)")
        func jq(_ filter: String, _ file: String) throws -> String {
            let out = try Self.runTool("/usr/bin/jq", ["-r", filter, file])
            #expect(out.status == 0, "jq \(filter): \(out.stderr)")
            return out.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let latency = #".metrics[] | select(.name == "request_latency")"#
        let p99 = try #require(Double(try jq(latency + " | .values.p99", dir + "/s.json")))
        #expect(abs(p99 - (Self.cell(r.stdout, "request_latency", "p99") ?? 0)) <= p99 * 0.005, "p99 \(p99): \(r.stdout)")
        #expect(try jq(latency + " | .unit", dir + "/s.json") == "s")
        #expect(try jq(latency + " | .values.count", dir + "/s.json") == "20")
        let figures = try jq(latency + " | .values | keys_unsorted | join(\",\")", dir + "/s.json")
        #expect(figures == "count,max,mean,min,p50,p90,p95,p99,p99.9,rate", "\(figures)")
        #expect(try jq(#".metrics[] | select(.name == "bytes_out") | "\(.unit) \(.values.count)""#, dir + "/s.json") == "bytes \(Int(Self.cell(r.stdout, "bytes_out", "count") ?? -1))")
        #expect(try jq(#".metrics[] | select(.name == "connections_open") | "\(.unit) \(.values.max)""#, dir + "/s.json") == "1 1")

        // Merged with itself: twice the count, the same percentiles, computed from the HDR data.
        let merge = try CommandRunner.run(["metrics", "merge", dir + "/s.json", dir + "/s.json", "-o", dir + "/m.json"])
        #expect(merge.status == 0, "\(merge.stderr)")
        #expect(try jq(latency + " | .values.count", dir + "/m.json") == "40")
        #expect(try jq(latency + " | .values.p99", dir + "/m.json") == (try jq(latency + " | .values.p99", dir + "/s.json")))
    }

    /// deploy/kubernetes/ passes the Kubernetes schemas (kubernetes-validate,
    /// offline); the same manifest with a wrong field does not.
    @Test func kubernetesManifestValidates() throws {
        let tool = "/tmp/mwvenv/bin/kubernetes-validate"
        try #require(FileManager.default.isExecutableFile(atPath: tool), "Tests/MoonwireCoreTests/Peers/setup_venv.sh has not run")
        let dir = CommandRunner.packageRoot.appendingPathComponent("deploy/kubernetes")
        let expected = [
            "script.yaml": "configmap/moonwire-script", "results.yaml": "persistentvolumeclaim/moonwire-results",
            "job.yaml": "job/moonwire-load", "merge.yaml": "job/moonwire-merge", "pod.yaml": "pod/moonwire-load",
        ]
        for (file, resource) in expected {
            let good = try Self.runTool(tool, ["--strict", dir.appendingPathComponent(file).path])
            #expect(good.status == 0, "\(file): \(good.stdout)\n\(good.stderr)")
            #expect((good.stdout + good.stderr).contains("passed for resource \(resource)"), "\(file)")
        }
        let manifest = dir.appendingPathComponent("job.yaml").path
        let broken = try String(contentsOfFile: manifest, encoding: .utf8).replacingOccurrences(of: "parallelism: 4", with: "parallelism: four")
        let bad = try CommandRunner.script("broken-job.yaml", broken)
        #expect(try Self.runTool(tool, ["--strict", bad]).status != 0)
    }

    static func venvPython() -> String? {
        let p = "/tmp/mwvenv/bin/python"
        return FileManager.default.isExecutableFile(atPath: p) ? p : nil
    }

    static func runPython(_ python: String, _ code: String, _ args: String...) throws -> CommandRunner.Result {
        try runTool(python, ["-c", code] + args)
    }

    static func runTool(_ tool: String, _ args: [String]) throws -> CommandRunner.Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = args
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return .init(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }
}
