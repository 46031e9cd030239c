import Foundation
import Testing

/// A real proxy in another process, on a free loopback port: Debian `tinyproxy` (HTTP
/// CONNECT, optionally with basic authentication or limited to one target port) or Debian
/// `microsocks` (SOCKS5), both installed by scripts/deps.sh --test.
///
/// Both dial their targets from 127.0.0.2, so a server on 127.0.0.1 can tell a connection
/// that came through the proxy (from 127.0.0.2) from a direct one (from 127.0.0.1).
final class ProxyPeer {
    enum Kind {
        /// tinyproxy; `auth` turns on BasicAuth, `onlyPort` allows CONNECT to that port only.
        case http(auth: (user: String, password: String)? = nil, onlyPort: Int? = nil)
        /// microsocks.
        case socks5
    }

    static let outgoingAddress = "127.0.0.2"

    let port: Int
    let url: String
    private let process: Process
    private let directory: URL
    private let logURL: URL

    init(_ kind: Kind) throws {
        port = try MosquittoPeer.freePort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("moonwire-proxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        logURL = directory.appendingPathComponent("proxy.log")
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        process = Process()
        switch kind {
        case .http(let auth, let onlyPort):
            var config = """
                Port \(port)
                Listen 127.0.0.1
                Bind \(Self.outgoingAddress)
                Timeout 60
                MaxClients 50
                LogLevel Connect
                Allow 127.0.0.1

                """
            if let auth { config += "BasicAuth \(auth.user) \(auth.password)\n" }
            // Without a ConnectPort line tinyproxy allows CONNECT to every port.
            if let onlyPort { config += "ConnectPort \(onlyPort)\n" }
            let configURL = directory.appendingPathComponent("tinyproxy.conf")
            try config.write(to: configURL, atomically: true, encoding: .utf8)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/tinyproxy")
            process.arguments = ["-d", "-c", configURL.path]
            let user = auth.map { "\($0.user):\($0.password)@" } ?? ""
            url = "http://\(user)127.0.0.1:\(port)"
        case .socks5:
            process.executableURL = URL(fileURLWithPath: "/usr/bin/microsocks")
            process.arguments = ["-i", "127.0.0.1", "-p", String(port), "-b", Self.outgoingAddress]
            url = "socks5://127.0.0.1:\(port)"
        }
        guard let binary = process.executableURL, FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw PeerError("\(process.executableURL?.path ?? "the proxy") is missing: run scripts/deps.sh --test")
        }
        let log = try FileHandle(forWritingTo: logURL)
        process.standardOutput = log
        process.standardError = log
        try process.run()
        try waitUntilListening()
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    /// What the proxy logged (tinyproxy logs each CONNECT request line).
    var log: String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }

    /// Neither proxy says when it listens: try to connect until it accepts (or exited).
    private func waitUntilListening() throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            guard process.isRunning else { throw PeerError("\(url) exited at start: \(log)") }
            if Self.accepts(port: port) { return }
            usleep(10_000)
        }
        throw PeerError("\(url) did not listen within 30 s: \(log)")
    }

    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}

/// A CA and a server certificate for localhost and 127.0.0.1 signed by it; a self-signed
/// one; one for another name, made with openssl once per test run.
enum TestCertificates {
    struct Files: Sendable {
        var dir: String
        var ca: String { dir + "/ca.pem" }
        var cert: String { dir + "/server.pem" }
        var key: String { dir + "/server.key" }
        var selfSigned: String { dir + "/self.pem" }
        var otherName: String { dir + "/other.pem" }
        /// MW_TLS_CERT, MW_TLS_KEY and MW_TLS_CA for examples/proxy.lua.
        var environment: [String: String] { ["MW_TLS_CERT": cert, "MW_TLS_KEY": key, "MW_TLS_CA": ca] }
    }

    static let files: Result<Files, Error> = Result {
        let dir = try Scratch.folder("tls").path
        let script = """
            set -e
            cd '\(dir)'
            openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=moonwire-test-ca 2>/dev/null
            openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null
            printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext.cnf
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext.cnf 2>/dev/null
            printf 'subjectAltName=DNS:other.example\\n' > other.cnf
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out other.pem -days 2 -extfile other.cnf 2>/dev/null
            openssl req -x509 -key server.key -out self.pem -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null
            """
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/bash")
        shell.arguments = ["-c", script]
        shell.standardOutput = FileHandle.nullDevice
        shell.standardError = FileHandle.nullDevice
        try shell.run()
        let deadline = ProcessDeadline(shell, seconds: 120)
        defer { deadline.check("openssl") }
        shell.waitUntilExit()
        guard shell.terminationStatus == 0 else { throw PeerError("openssl failed") }
        return Files(dir: dir)
    }
}
