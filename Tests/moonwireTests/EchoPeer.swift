import Foundation
import Testing

/// A real echo server in another process (Python `websockets`, from the venv that
/// Tests/MoonwireCoreTests/Peers/setup_venv.sh makes), for the examples to talk to.
final class EchoPeer {
    let port: Int
    let process: Process

    var url: String { "ws://127.0.0.1:\(port)/" }

    static let peers = CommandRunner.packageRoot.appendingPathComponent("Tests/MoonwireCoreTests/Peers")

    /// The venv's python (websockets, pexpect), made by setup_venv.sh if it is missing.
    static func python() throws -> String {
        let setup = Process()
        setup.executableURL = URL(fileURLWithPath: "/bin/bash")
        setup.arguments = [peers.appendingPathComponent("setup_venv.sh").path]
        let pythonPath = Pipe()
        setup.standardOutput = pythonPath
        setup.standardError = FileHandle.nullDevice
        try setup.run()
        let setupDeadline = ProcessDeadline(setup, seconds: 300)
        defer { setupDeadline.check("setup_venv.sh") }
        let python = String(decoding: pythonPath.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        setup.waitUntilExit()
        guard setup.terminationStatus == 0 else { throw PeerError("setup_venv.sh failed (is PyPI reachable?)") }
        return python
    }

    /// `script`: another peer from Peers/ that prints "READY <port>" (socketio_server.py),
    /// started with `arguments`.
    init(script: String = "echo_websockets.py", arguments: [String] = []) throws {
        let python = try Self.python()
        let peers = Self.peers
        process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [peers.appendingPathComponent(script).path] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let startDeadline = ProcessDeadline(process, seconds: 60)
        defer { startDeadline.check("the echo peer's start") }
        // The peer prints "READY <port>" once it listens: wait for that line, not for time.
        var seen = ""
        while !seen.contains("\n") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        guard let line = seen.split(separator: "\n").first, line.hasPrefix("READY "), let port = Int(line.dropFirst(6)) else {
            kill(process.processIdentifier, SIGKILL)
            throw PeerError("the echo peer did not start: \(seen)")
        }
        self.port = port
    }

    /// Runs a peer from Peers/ to its end (at most `seconds`): its exit status and stdout.
    static func runPython(_ script: String, _ arguments: [String], seconds: Double = 60) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try python())
        process.arguments = [peers.appendingPathComponent(script).path] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let deadline = ProcessDeadline(process, seconds: seconds)
        defer { deadline.check(script) }
        let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    deinit {
        // The test runner's children inherit a blocked SIGTERM: only SIGKILL is sure.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

struct PeerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
