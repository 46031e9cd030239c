import ArgumentParser
import Foundation
import MoonwireLua
import NIOCore
import NIOPosix

struct Test: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run Lua test files written with busted's vocabulary.",
        discussion: """
            Test files are named *_test.lua, *_spec.lua or test_*.lua; with no path, \
            moonwire looks in tests/, else spec/. Each file runs in a Lua state of its own. \
            The last line is "N passed, N failed" (", N skipped" when any); the exit code \
            is 0 only if nothing failed.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "Run only the tests whose full name matches this Lua pattern.")
    var filter: String = ""

    @Option(help: "Also write the results as JUnit XML to this file.")
    var junit: String?

    @Flag(help: "Print TAP version 13 on stdout instead of the usual lines.")
    var tap = false

    @Option(help: "Seconds each test may take, hooks included.")
    var timeout: Double = 10

    @Option(help: "How many files to run at once, each in its own Lua state and thread.")
    var jobs: Int = 1

    @Argument(help: "Test files or folders (default: tests/ or spec/).")
    var paths: [String] = []

    func validate() throws {
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be a number of seconds above 0") }
        guard jobs >= 1 else { throw ValidationError("--jobs must be 1 or more") }
    }

    func run() throws {
        let files = try TestDiscovery.files(in: paths)
        let reports = runAll(files)
        let summary = TestSummary(reports: reports)
        if tap {
            print(TestOutput.tap(reports, summary: summary), terminator: "")
        } else {
            print(summary.line)
        }
        if let junit {
            try TestOutput.junit(reports).write(toFile: junit, atomically: true, encoding: .utf8)
        }
        fflush(stdout)
        if summary.failed > 0 { throw ExitCode(1) }
    }

    /// Runs the files on `jobs` event loops; prints each file's lines as it ends.
    private func runAll(_ files: [String]) -> [TestFileReport] {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: min(jobs, max(files.count, 1)))
        defer { try? group.syncShutdownGracefully() }
        let state = RunState(count: files.count)
        let workers = DispatchGroup()
        for loop in group.makeIterator() {
            workers.enter()
            Thread.detachNewThread {
                while let index = state.next() {
                    let report = runFile(files[index], on: loop)
                    state.finish(index, report) { if !tap { print(TestOutput.lines(report), terminator: "") ; fflush(stdout) } }
                }
                workers.leave()
            }
        }
        workers.wait()
        return state.reports.compactMap { $0 }
    }

    private func runFile(_ file: String, on loop: EventLoop) -> TestFileReport {
        let start = Date()
        let runner = TestFileRunner(eventLoop: loop, logger: global.makeLogger())
        let results: [TestCaseResult]
        do {
            results = try runner.run(file: file, filter: filter, timeout: timeout).wait()
        } catch {
            results = [TestCaseResult(name: file, status: .failed, duration: 0, message: "\(error)", traceback: "", location: file)]
        }
        return TestFileReport(file: file, results: results, duration: Date().timeIntervalSince(start))
    }
}

/// Hands out files to workers and keeps the reports in file order.
private final class RunState: @unchecked Sendable {
    private let lock = NSLock()
    private var nextIndex = 0
    private(set) var reports: [TestFileReport?]

    init(count: Int) {
        reports = Array(repeating: nil, count: count)
    }

    func next() -> Int? {
        lock.lock()
        defer { lock.unlock() }
        guard nextIndex < reports.count else { return nil }
        nextIndex += 1
        return nextIndex - 1
    }

    func finish(_ index: Int, _ report: TestFileReport, then print: () -> Void) {
        lock.lock()
        defer { lock.unlock() }
        reports[index] = report
        print()
    }
}
