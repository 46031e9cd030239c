import Foundation
import Testing

/// Runs the built `moonwire` executable as a user would, capturing everything.
struct CommandRunner {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The package's root folder, for examples/ and fixtures.
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `moonwire` sits beside the test bundle in the build folder.
    static let executable: URL = {
        let me = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
        var dir = me.deletingLastPathComponent()
        while dir.path != "/" {
            let candidate = dir.appendingPathComponent("moonwire")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return me.deletingLastPathComponent().appendingPathComponent("moonwire")
    }()

    /// `environment` is added to (or overrides) the test's own; `tool` runs
    /// another program (found on PATH) instead of moonwire, `directory` in
    /// another folder than the package's root.
    static func process(
        _ arguments: [String], input: Pipe? = nil, environment: [String: String] = [:], tool: String? = nil, directory: URL? = nil
    ) -> (Process, Pipe, Pipe) {
        let process = Process()
        process.executableURL = tool == nil ? executable : URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = tool.map { [$0] + arguments } ?? arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.currentDirectoryURL = directory ?? packageRoot
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input ?? FileHandle.nullDevice
        return (process, out, err)
    }

    static func run(_ arguments: String...) throws -> Result {
        try run(arguments)
    }

    /// `input` is written to the command's stdin, which is then closed unless `closeInput` is false.
    /// `whileRunning` may read the start of stdout (and act on it) before the rest is read;
    /// what it returns is the start of `stdout`. A command still running after `deadline`
    /// seconds is killed and the test fails: no test can hang CI.
    static func run(
        _ arguments: [String], input: String? = nil, closeInput: Bool = true, deadline: Double = 120,
        environment: [String: String] = [:], tool: String? = nil, directory: URL? = nil, whileRunning: ((FileHandle) -> Data)? = nil
    ) throws -> Result {
        let stdin = input.map { _ in Pipe() }
        let (process, out, err) = process(arguments, input: stdin, environment: environment, tool: tool, directory: directory)
        try process.run()
        let watch = ProcessDeadline(process, seconds: deadline)
        defer { watch.check("moonwire \(arguments.joined(separator: " "))") }
        if let stdin, let input {
            stdin.fileHandleForWriting.write(Data(input.utf8))
            if closeInput { try stdin.fileHandleForWriting.close() }
        }
        // Read both pipes to their end before waiting, so a chatty child cannot block on a full pipe.
        let stderrData = DataBox()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async {
            stderrData.data = err.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        var stdoutData = whileRunning?(out.fileHandleForReading) ?? Data()
        stdoutData += out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: stdoutData, as: UTF8.self),
            stderr: String(decoding: stderrData.data, as: UTF8.self)
        )
    }

    /// Writes a throwaway script and returns its path.
    static func script(_ name: String, _ source: String) throws -> String {
        let file = try Scratch.folder("scripts").appendingPathComponent(name)
        try source.write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }
}

/// Kills a child process that is still running after its deadline (SIGKILL: the
/// test runner's children inherit a blocked SIGTERM), so that reads of its pipes
/// end and `waitUntilExit` returns; `check` then fails the test.
final class ProcessDeadline: @unchecked Sendable {
    private let fired = Flag()
    private let work: DispatchWorkItem
    private let seconds: Double

    init(_ process: Process, seconds: Double) {
        self.seconds = seconds
        work = DispatchWorkItem { [fired, pid = process.processIdentifier] in
            fired.set()
            kill(pid, SIGKILL)
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: work)
    }

    /// Disarms the deadline; records an issue if it had fired.
    func check(_ what: String) {
        work.cancel()
        if fired.isSet { Issue.record("\(what) was still running after \(seconds) s and was killed") }
    }
}

private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

private final class DataBox: @unchecked Sendable {
    var data = Data()
}
