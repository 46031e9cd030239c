import Foundation
import Testing

/// A real MQTT broker (Debian `mosquitto`, installed by scripts/deps.sh --test) with a
/// WebSocket listener on a free loopback port, for the MQTT example.
final class MosquittoPeer {
    static let binary = "/usr/sbin/mosquitto"
    let port: Int
    private let process: Process
    private let directory: URL

    var url: String { "ws://127.0.0.1:\(port)/" }

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw PeerError("\(Self.binary) is missing: run scripts/deps.sh --test")
        }
        port = try Self.freePort()
        let plainPort = try Self.freePort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("moonwire-mosquitto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // mosquitto 2.0.11 refuses to start with only a websockets listener: a plain one too.
        let config = """
            listener \(plainPort) 127.0.0.1
            listener \(port) 127.0.0.1
            socket_domain ipv4
            protocol websockets
            allow_anonymous true

            """
        let configURL = directory.appendingPathComponent("mosquitto.conf")
        try config.write(to: configURL, atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["-c", configURL.path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        // It logs "... running" once both listeners are open: wait for that line, not for time.
        var seen = ""
        while !seen.contains(" running") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        guard seen.contains(" running") else {
            kill(process.processIdentifier, SIGKILL)
            throw PeerError("mosquitto did not start: \(seen)")
        }
        // It logs every connection from now on: keep its pipe drained so it never blocks
        // writing a log line (the read ends when it exits).
        let log = out.fileHandleForReading
        Thread.detachNewThread { while !log.availableData.isEmpty {} }
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    /// A loopback port nobody listens on now (the kernel's pick for port 0).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw PeerError("socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else { throw PeerError("bind() failed") }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw PeerError("getsockname() failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
