import ArgumentParser
import Foundation
import MoonwireCore
import MoonwireLua
import NIOCore
import NIOPosix

struct Test: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run Lua test files written with busted's vocabulary.",
        discussion: """
            In the paths given, test files are named *_test.lua, *_spec.lua or test_*.lua. \
            With no path, moonwire runs as busted does: the ROOT of a .busted file here, \
            else spec/, files matching the Lua pattern _spec (a project with only tests/ \
            gets tests/). Each file \
            runs in a Lua state of its own. \
            The last line is "N passed, N failed" (", N errors" and ", N skipped" when any): \
            a failed assertion is a failure, any other error or a timeout an error. The exit \
            code is 0 only if nothing failed or erred.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "Run only the tests whose full name matches this Lua pattern.")
    var filter: String = ""

    @Option(help: "Also write the results as JUnit XML to this file.")
    var junit: String?

    @Flag(help: "Print TAP version 13 on stdout instead of the usual lines (same as -o tap).")
    var tap = false

    @Option(name: [.customShort("o"), .long], help: "What to print on stdout: text (the usual lines), gtest (busted's), tap, json (busted's JSON), junit; busted's names utfTerminal, plainTerminal and TAP too.")
    var output: String?

    @Option(name: [.customShort("t"), .long], help: "Run only the tests with one of these #tags in their full name (comma-separated; repeatable).")
    var tags: [String] = []

    @Option(name: .customLong("exclude-tags"), help: "Leave out the tests with one of these #tags in their full name (comma-separated; repeatable).")
    var excludeTags: [String] = []

    @Option(name: [.customShort("p"), .long], help: "Find test files in folders by this Lua pattern on their name (busted's --pattern; repeatable).")
    var pattern: [String] = []

    @Option(help: "A Lua file run in each test file's Lua state before the file.")
    var helper: String?

    @Option(name: [.customShort("m"), .long], help: "Lua module paths put before package.path (';'-separated, like busted's --lpath; default: busted's ./src/?.lua;./src/?/?.lua;./src/?/init.lua).")
    var lpath: String?

    @Option(help: "C module paths put before package.cpath.")
    var cpath: String?

    @Option(help: "Seconds each test may take, hooks included.")
    var timeout: Double = 10

    @Option(help: "How many files to run at once, each in its own Lua state and thread.")
    var jobs: Int = 1

    @Option(help: "Seed math.random in every file with this number (and so the order --shuffle picks).")
    var seed: UInt32?

    @Flag(help: "Run the files, and the tests in each describe, in a random order (printed as its seed).")
    var shuffle = false

    @Flag(help: "Stop at the first test that fails or errs; files not started yet are not run.")
    var failFast = false

    @Option(name: .customLong("repeat"), help: "Run each file this many times, each time in a new Lua state (to catch flaky tests).")
    var repeatCount: Int = 1

    @Flag(help: "Print where each test is declared and its name, without running any.")
    var list = false

    @Flag(name: .customLong("virtual-time"), help: "Run timers, sleeps, heartbeats, backoff and timeouts on a virtual clock that jumps to the next deadline when nothing else can happen (one file: '-- moonwire: virtual-time' at its top).")
    var virtualTime = false

    @OptionGroup var memory: MemoryLimitOption

    @OptionGroup var sendBudget: SendBudgetOption

    @Argument(help: "Test files or folders (default: .busted's ROOT, else spec/, else tests/).")
    var paths: [String] = []

    func validate() throws {
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be a number of seconds above 0") }
        guard jobs >= 1 else { throw ValidationError("--jobs must be 1 or more") }
        guard repeatCount >= 1 else { throw ValidationError("--repeat must be 1 or more") }
    }

    /// busted's default --lpath: modules under src/ are found by name.
    static let bustedLpath = "./src/?.lua;./src/?/?.lua;./src/?/init.lua"

    /// What goes to stdout.
    enum Output {
        case text, tap, json, junit, gtest

        /// busted's handler names (as .busted and `-o` give them), and moonwire's own
        /// `text` and `tap`; case does not matter.
        static let byName: [(name: String, output: Output)] = [
            ("text", .text), ("utfTerminal", .text), ("plainTerminal", .text), ("TAP", .tap),
            ("json", .json), ("junit", .junit), ("gtest", .gtest),
        ]

        init?(named name: String) {
            guard let found = Self.byName.first(where: { $0.name.lowercased() == name.lowercased() }) else { return nil }
            self = found.output
        }

        static var names: String { byName.map(\.name).joined(separator: ", ") }
    }

    /// The option from the command line, else from .busted's default task.
    private func configured(_ cli: [String], _ key: String, _ config: BustedConfig) -> [String] {
        let values = cli.isEmpty ? config.values[key] ?? [] : cli
        return values.flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }.filter { !$0.isEmpty }
    }

    static func loadConfig() throws -> BustedConfig {
        guard FileManager.default.fileExists(atPath: ".busted") else { return BustedConfig() }
        do {
            return try BustedConfig.load(path: ".busted")
        } catch {
            let reason = error.description.split(separator: "\n").first.map(String.init) ?? ""
            throw ValidationError("bad .busted file: \(reason.replacingOccurrences(of: " stack traceback:", with: ""))")
        }
    }

    func run() throws {
        let config = try Self.loadConfig()
        // The command line wins over .busted, as every other option does.
        let outputName = output ?? (tap ? "tap" : nil) ?? config.values["output"]?.first ?? "text"
        guard let format = Output(named: outputName) else {
            let from = output == nil && !tap ? "output '\(outputName)' in .busted" : "--output '\(outputName)'"
            throw ValidationError("unknown \(from); use \(Output.names)")
        }
        let tags = configured(tags, "tags", config), excludeTags = configured(excludeTags, "exclude-tags", config)
        if let both = tags.first(where: excludeTags.contains) {
            throw ValidationError("--tags and --exclude-tags both name '\(both)'")
        }
        var files = try TestDiscovery.files(
            in: paths, root: config.values["ROOT"] ?? [], patterns: pattern.isEmpty ? config.values["pattern"] ?? [] : pattern
        )
        // --shuffle without --seed picks one, and says which, so the order can be had again.
        let seed = seed ?? (shuffle ? UInt32.random(in: 1...999_999) : nil)
        if shuffle, let seed { files = Self.shuffled(files, seed: seed) }
        let runs = files.flatMap { file in (1...repeatCount).map { (file: file, run: repeatCount > 1 ? $0 : nil) } }
        var options = TestFileRunner.Options(
            filter: filter, timeout: timeout, seed: seed, shuffle: shuffle, failFast: failFast, list: list
        )
        options.tags = tags
        options.excludeTags = excludeTags
        options.virtualTime = virtualTime
        options.helper = helper ?? config.values["helper"]?.first ?? ""
        options.lpath = lpath ?? config.values["lpath"]?.joined(separator: ";") ?? Self.bustedLpath
        options.cpath = cpath ?? config.values["cpath"]?.joined(separator: ";") ?? ""
        if !options.helper.isEmpty, !FileManager.default.fileExists(atPath: options.helper) {
            throw ValidationError("cannot read --helper '\(options.helper)': No such file")
        }
        let gtest = TestOutput.GTest(colors: isatty(1) == 1, verbose: config.values["verbose"]?.first == "true")
        let started = Date()
        if format == .gtest, !list {
            print(gtest.header(seed: shuffle ? seed : nil), terminator: "")
            fflush(stdout)
        }
        let perFile: ((TestFileReport) -> String)?
        switch format {
        case _ where list: perFile = TestOutput.list
        case .text: perFile = TestOutput.lines
        case .gtest: perFile = gtest.file
        default: perFile = nil
        }
        let reports = try runAll(runs, options: options, perFile: perFile)
        if list {
            if reports.contains(where: { $0.results.contains { $0.status == .error } }) { throw ExitCode(1) }
            return
        }
        let summary = TestSummary(reports: reports)
        switch format {
        case .tap: print(TestOutput.tap(reports, summary: summary, seed: shuffle ? seed : nil), terminator: "")
        case .json: print(TestOutput.json(reports))
        case .junit: print(TestOutput.junit(reports), terminator: "")
        case .gtest: print(gtest.summary(reports, duration: Date().timeIntervalSince(started)), terminator: "")
        case .text:
            if shuffle, let seed { print("shuffled with --seed \(seed)") }
            print(summary.line)
        }
        if let junit {
            try TestOutput.junit(reports).write(toFile: junit, atomically: true, encoding: .utf8)
        }
        fflush(stdout)
        if summary.failed + summary.errors > 0 { throw ExitCode(1) }
    }

    /// The files in the order a seed gives (Fisher-Yates over SplitMix64): the
    /// same seed, the same order, on every machine.
    static func shuffled(_ files: [String], seed: UInt32) -> [String] {
        var state = UInt64(seed)
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        var out = files
        for i in stride(from: out.count - 1, to: 0, by: -1) {
            out.swapAt(i, Int(next() % UInt64(i + 1)))
        }
        return out
    }

    /// Runs the files on `jobs` event loops; prints each file's `perFile` text as it ends.
    private func runAll(_ runs: [(file: String, run: Int?)], options: TestFileRunner.Options, perFile: ((TestFileReport) -> String)?) throws -> [TestFileReport] {
        // LoopTicks: a virtual clock jumps only after whole loop ticks without I/O.
        let group = try LoopGroup.make(threads: min(jobs, max(runs.count, 1)), metricsDelegate: LoopTicks())
        defer { try? group.syncShutdownGracefully() }
        let state = RunState(count: runs.count)
        let workers = DispatchGroup()
        for loop in group.makeIterator() {
            workers.enter()
            Thread.detachNewThread {
                while let index = state.next() {
                    let report = runFile(runs[index].file, run: runs[index].run, options: options, on: loop)
                    let failed = report.results.contains { $0.status == .failed || $0.status == .error }
                    state.finish(index, report, stopping: failFast && failed) {
                        if let perFile { print(perFile(report), terminator: "") }
                        fflush(stdout)
                    }
                }
                workers.leave()
            }
        }
        workers.wait()
        return state.reports.compactMap { $0 }
    }

    private func runFile(_ file: String, run: Int?, options: TestFileRunner.Options, on loop: EventLoop) -> TestFileReport {
        let start = Date()
        // The process's send budget is shared by the files running side by side.
        let budget = (try? sendBudget.bytes()).flatMap { $0 }.map { $0 == 0 ? 0 : max(1, $0 / jobs) }
        let runner = TestFileRunner(eventLoop: loop, logger: global.makeLogger(), memoryLimit: try? memory.bytes(), sendBudget: budget)
        let results: [TestCaseResult]
        do {
            results = try runner.run(file: file, options: options).wait()
        } catch {
            results = [TestCaseResult(name: file, status: .error, duration: 0, message: "\(error)", traceback: "", location: file)]
        }
        return TestFileReport(file: file, results: results, duration: Date().timeIntervalSince(start), run: run)
    }
}

/// Hands out files to workers and keeps the reports in file order.
private final class RunState: @unchecked Sendable {
    private let lock = NSLock()
    private var nextIndex = 0
    private var stopped = false
    private(set) var reports: [TestFileReport?]

    init(count: Int) {
        reports = Array(repeating: nil, count: count)
    }

    func next() -> Int? {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped, nextIndex < reports.count else { return nil }
        nextIndex += 1
        return nextIndex - 1
    }

    /// `stopping`: no file starts after this one (`--fail-fast`).
    func finish(_ index: Int, _ report: TestFileReport, stopping: Bool, then print: () -> Void) {
        lock.lock()
        defer { lock.unlock() }
        reports[index] = report
        if stopping { stopped = true }
        print()
    }
}
