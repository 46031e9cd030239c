import Foundation
import Testing

/// `moonwire report` and `run --report`: real runs over loopback, the page
/// opened in Debian's headless Chromium, its DOM read back after the scripts
/// ran. One test at a time: Chromium and the runs compete for two cores.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ReportTests {
    static let chromium = "/usr/bin/chromium"

    /// What Chromium made of a page: the DOM after its scripts ran, and every
    /// line the page wrote to the console (errors included).
    struct Browsed {
        var dom: String
        var console: [String]
    }

    static func browse(_ html: String, screenshot: String? = nil) throws -> Browsed {
        try #require(FileManager.default.isExecutableFile(atPath: chromium), "chromium is missing: run scripts/deps.sh --test")
        let profile = try MetricsRunTests.scratch("chromium-profile")
        var args = [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + profile,
            "--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000",
        ]
        if let screenshot {
            args += ["--screenshot=" + screenshot, "--window-size=1280,2400", "--hide-scrollbars"]
        } else {
            args += ["--dump-dom"]
        }
        let r = try MetricsRunTests.runTool(chromium, args + ["file://" + html])
        #expect(r.status == 0, "\(r.stderr)")
        return Browsed(dom: r.stdout, console: r.stderr.split(separator: "\n").filter { $0.contains(":CONSOLE") }.map(String.init))
    }

    /// Each chart's title and how many points it draws: coordinates in its
    /// lines, bars in its bar charts. A chart with a line of no point counts 0.
    /// The points of a line's `d` ("M x,y L x,y ..."): each must be a pair of finite
    /// numbers inside the plot box (left top width height), else the line counts as none.
    static func plotted(_ d: String, box: [Double]) -> Int {
        guard box.count == 4 else { return 0 }
        let slack = 0.5
        var count = 0
        for command in d.split(whereSeparator: { $0 == "M" || $0 == "L" }) {
            let pair = command.prefix { $0 != "h" }.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard pair.count == 2, let x = pair[0], let y = pair[1], x.isFinite, y.isFinite,
                  x >= box[0] - slack, x <= box[0] + box[2] + slack, y >= box[1] - slack, y <= box[1] + box[3] + slack
            else { return 0 }
            count += 1
        }
        return count
    }

    static func charts(_ dom: String) -> [(title: String, points: Int)] {
        dom.components(separatedBy: "<figure class=\"panel\">").dropFirst().map { figure in
            let title = figure.components(separatedBy: "<figcaption>").dropFirst().first?.components(separatedBy: "</figcaption>").first ?? "?"
            let svg = figure.components(separatedBy: "</svg>").first ?? ""
            let box = (svg.components(separatedBy: "data-box=\"").dropFirst().first?.components(separatedBy: "\"").first ?? "")
                .split(separator: " ").compactMap { Double($0) }
            let lines = svg.components(separatedBy: "<path class=\"line").dropFirst().map { path -> Int in
                let d = path.components(separatedBy: " d=\"").dropFirst().first?.components(separatedBy: "\"").first ?? ""
                return plotted(d, box: box)
            }
            let bars = svg.components(separatedBy: "<rect class=\"bar").count - 1
            return (title, lines.contains(0) ? 0 : lines.reduce(0, +) + bars)
        }
    }

    /// The real thing: examples/load_rate.lua with --report; the page loads in
    /// Chromium with nothing on the console, its script runs to the end, every
    /// chart has points, and a screenshot is taken.
    @Test func loadRateReportOpensInChromium() throws {
        let dir = try MetricsRunTests.scratch("report-example")
        let report = dir + "/report.html"
        let r = try CommandRunner.run([
            "run", "--report", report, "--summary-json", dir + "/s.json", "examples/load_rate.lua", "-", "40", "2.5",
        ])
        #expect(MetricsRunTests.ranLoadRate(r), "\(r.stdout)\n\(r.stderr)")
        let html = try String(contentsOfFile: report, encoding: .utf8)
        for fetch in [" src=", " href=", "url(", "@import", "fetch(", "XMLHttpRequest"] {
            #expect(!html.contains(fetch), "the report fetches nothing: \(fetch)")
        }
        #expect(html.contains("examples/load_rate.lua - 40 2.5"), "the command line")
        #expect(html.contains(#/<td class="verdict">(pass|FAIL)</td><td><code>request_latency:p99 &lt; 0.5</code>/#))
        // Only the report asked for the JSON-lines file: it is gone.
        let left = try FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path)
        #expect(!left.contains { $0.hasPrefix("moonwire-report-") }, "\(left)")

        let page = try Self.browse(report)
        #expect(page.console.isEmpty, "\(page.console)")
        #expect(page.dom.contains("data-ready=\"yes\""), "report.js ran to its end")
        let charts = Self.charts(page.dom)
        let titles = charts.map(\.title)
        for expected in [
            "Messages per second", "Request latency, second by second", "Iteration duration, second by second", "Connections open",
            "Reconnects per second", "Errors and drops per second", "Messages waiting in send queues", "Bytes waiting to be sent",
            "Connect time by step",
        ] {
            #expect(titles.contains(expected), "\(titles)")
        }
        #expect(titles.contains { $0.hasPrefix("request_latency (100 values)") }, "\(titles)")
        #expect(charts.allSatisfy { $0.points > 0 }, "empty: \(charts.filter { $0.points == 0 })")

        let shot = dir + "/report.png"
        _ = try Self.browse(report, screenshot: shot)
        let png = try Data(contentsOf: URL(fileURLWithPath: shot))
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 20_000, "\(png.count) bytes")
    }

    /// The check above fails on an empty chart: metrics that are in the file
    /// with no value make a chart with a line of no point.
    @Test func anEmptySeriesFailsTheCheck() throws {
        let dir = try MetricsRunTests.scratch("report-empty")
        let lines = (1...3).map { #"{"metrics":{"connections_open":{"count":1,"max":1},"messages_in":{},"messages_out":{}},"t":\#($0)}"# }
        try (lines.joined(separator: "\n") + "\n").write(toFile: dir + "/m.jsonl", atomically: true, encoding: .utf8)
        let r = try CommandRunner.run(["report", dir + "/m.jsonl", "-o", dir + "/r.html"])
        #expect(r.status == 0, "\(r.stderr)")
        let page = try Self.browse(dir + "/r.html")
        let charts = Self.charts(page.dom)
        #expect(charts.first { $0.title == "Messages per second" }?.points == 0, "\(charts)")
        #expect(charts.first { $0.title == "Connections open" }?.points == 3, "\(charts)")
    }

    /// A run killed mid-way: its file ends in a cut line and has no end-of-run
    /// line; the report goes up to the last full line and says so.
    @Test func killedRunStillReports() throws {
        let dir = try MetricsRunTests.scratch("report-killed")
        let jsonl = dir + "/m.jsonl"
        let script = try CommandRunner.script("forever.lua", """
            local file = mw.args[1]
            mw.metrics.counter("ticks"):inc()
            -- Says "ready" once two snapshot lines are in the file, then runs on.
            local t
            t = mw.every(0.05, function()
              local f = io.open(file)
              local lines = 0
              if f then for _ in f:lines() do lines = lines + 1 end f:close() end
              if lines >= 2 then print("ready") io.stdout:flush() t:cancel() end
            end)
            mw.every(1, function() end)
            """)
        let (process, out, _) = CommandRunner.process(["run", "--metrics-jsonl", jsonl, script, jsonl])
        try process.run()
        // A script that never says "ready" is killed, which ends the read below.
        let watch = ProcessDeadline(process, seconds: 60)
        let ready = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
        #expect(ready.contains("ready"))
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        watch.check("the forever.lua run before it said ready")
        let full = try Data(contentsOf: URL(fileURLWithPath: jsonl))
        let firstTwo = full.split(separator: 0x0A).prefix(2)
        // The cut a kill in the middle of a write leaves: half a line, no newline.
        var cut = Data(firstTwo.joined(separator: [0x0A])) + [0x0A]
        cut += firstTwo.last!.prefix(firstTwo.last!.count / 2)
        try cut.write(to: URL(fileURLWithPath: jsonl))
        let r = try CommandRunner.run(["report", jsonl, "-o", dir + "/r.html"])
        #expect(r.status == 0, "\(r.stderr)")
        let html = try String(contentsOfFile: dir + "/r.html", encoding: .utf8)
        #expect(html.contains("line 3 is cut short (the run was killed?)"), "\(html.prefix(3000))")
        #expect(html.contains("the report goes up to t = 2.0"), "\(html.prefix(3000))")
        #expect(Self.charts(html).allSatisfy { $0.points > 0 }, "\(Self.charts(html))")
    }

    /// A file that is not a moonwire metrics file is an error naming it (exit 2).
    @Test func notAMetricsFileIsAUsageError() throws {
        let dir = try MetricsRunTests.scratch("report-bad")
        try "{\"hello\": 1}\n".write(toFile: dir + "/other.json", atomically: true, encoding: .utf8)
        try "".write(toFile: dir + "/empty.jsonl", atomically: true, encoding: .utf8)
        for bad in [dir + "/other.json", "examples/load_rate.lua", dir + "/missing.jsonl", dir + "/empty.jsonl", dir] {
            let r = try CommandRunner.run(["report", bad, "-o", dir + "/r.html"])
            #expect(r.status == 2, "\(bad): \(r.stderr)")
            #expect(r.stderr.contains(bad), "\(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir + "/r.html"))
    }

    /// Two shards of one run make one report: counts add up, both shards are named.
    @Test func shardsMakeOneReport() throws {
        let dir = try MetricsRunTests.scratch("report-shards")
        var files: [String] = []
        for i in 1...2 {
            let r = try CommandRunner.run([
                "run", "--shard", "\(i)/2", "--metrics-jsonl", dir + "/m\(i).jsonl", "--summary-json", dir + "/s\(i).json",
                "examples/load_rate.lua", "-", "40", "1.5",
            ])
            #expect(MetricsRunTests.ranLoadRate(r), "\(r.stdout)\n\(r.stderr)")
            files += [dir + "/m\(i).jsonl", dir + "/s\(i).json"]
        }
        let r = try CommandRunner.run(["report"] + files + ["-o", dir + "/r.html"])
        #expect(r.status == 0, "\(r.stderr)")
        let html = try String(contentsOfFile: dir + "/r.html", encoding: .utf8)
        #expect(html.contains("<dt>shards</dt><dd>1/2, 2/2</dd>"), "\(html.prefix(3000))")
        #expect(html.contains("<dd>60 out, 60 in</dd>"), "\(html.prefix(3000))")
        #expect(html.contains("request_latency (60 values)"))
        let charts = Self.charts(html)
        #expect(charts.count >= 9 && charts.allSatisfy { $0.points > 0 }, "\(charts)")
    }

    /// The JSON-lines file the report reads: the command line and start on
    /// the first line, per-line histogram figures whose counts add up to the
    /// run's, and an end-of-run line with the thresholds. The server answers
    /// the first second's requests after 10 ms, the rest after 200 ms.
    @Test func jsonlHasPerLineFiguresAndAnEnd() throws {
        let dir = try MetricsRunTests.scratch("report-jsonl")
        let script = try CommandRunner.script("phases.lua", """
            local server = assert(mw.listen("ws://127.0.0.1:0/"))
            local slow_from = mw.now() + 1
            server:on_message(function(peer, msg)
              mw.after(mw.now() < slow_from and 0.01 or 0.2, function() peer:send(msg) end)
            end)
            mw.thresholds { ["request_latency:max"] = "< 10" }
            local c = mw.connect(server:url())
            assert(c:wait_open(5))
            mw.rate { rate = 40, duration = 2.5, fn = function(n)
              local id = tostring(n)
              assert(c:request(id, function(m) return m == id end, 5))
            end }
            c:close()
            server:close()
            """)
        let r = try CommandRunner.run(["run", "--metrics-jsonl", dir + "/m.jsonl", "--threshold", "errors:count == 0", script])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = try String(contentsOfFile: dir + "/m.jsonl", encoding: .utf8).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        try #require(lines.count >= 3)
        #expect((lines[0]["command"] as? [String])?.suffix(3) == ["--threshold", "errors:count == 0", script])
        #expect(lines[0]["start"] is String)
        #expect(lines.dropLast().allSatisfy { $0["end"] == nil })
        #expect(lines.last?["end"] as? Bool == true)
        #expect(lines.last?["thresholds"] as? [String] == ["errors:count == 0", "request_latency:max < 10"])
        func latency(_ line: [String: Any]) -> [String: Double] { ((line["metrics"] as? [String: Any])?["request_latency"] as? [String: Double]) ?? [:] }
        let intervals = lines.map { latency($0)["interval_count"] ?? -1 }
        #expect(intervals.reduce(0, +) == 100, "\(intervals)")
        #expect(latency(lines[0])["interval_max"] ?? 1 < 0.1, "\(latency(lines[0]))")
        #expect(latency(lines.last!)["interval_p50"] ?? 0 >= 0.2, "\(latency(lines.last!))")
        // Since the start, the first second's fast answers still hold p50 down a second later.
        #expect(latency(lines[1])["p50"] ?? 1 < latency(lines[1])["interval_p50"] ?? 0, "\(latency(lines[1]))")
    }

    /// buffered_bytes: what waits to be sent, here to a peer that never reads
    /// (a listening socket nobody accepts from: the kernel takes the
    /// connection, and its buffers fill).
    @Test func bufferedBytesShowWhatWaits() throws {
        let dir = try MetricsRunTests.scratch("report-buffered")
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, len) } }
        listen(listener, 4)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &len) } }
        let port = UInt16(bigEndian: addr.sin_port)
        let script = try CommandRunner.script("stuck.lua", """
            local url, file = mw.args[1], mw.args[2]
            local c = mw.connect(url, { close_timeout = 0.1 })
            assert(c:wait_open(5))
            -- 12 MiB: more than the kernel's buffers on loopback take (about 7), less than the queue's 16.
            local chunk = string.rep("x", 65536)
            for _ = 1, 192 do assert(c:send(chunk)) end
            local function lines()
              local n, f = 0, io.open(file)
              if f then for _ in f:lines() do n = n + 1 end f:close() end
              return n
            end
            -- Ends once a snapshot taken after the buffers filled is in the file.
            local before = lines()
            while lines() <= before do mw.sleep(0.05) end
            mw.exit(0)
            """)
        let jsonl = dir + "/m.jsonl"
        let r = try CommandRunner.run(["run", "--metrics-jsonl", jsonl, script, "tcp://127.0.0.1:\(port)", jsonl])
        #expect(r.status == 0, "\(r.stderr)")
        let highest = try String(contentsOfFile: jsonl, encoding: .utf8).split(separator: "\n").compactMap { line -> Double? in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            return ((object?["metrics"] as? [String: Any])?["buffered_bytes"] as? [String: Double])?["count"]
        }.max() ?? 0
        #expect(highest >= 1_048_576, "\(highest)")
    }
}
