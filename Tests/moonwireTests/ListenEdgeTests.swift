#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// `moonwire listen` at the edge of its resources, as a separate process.
@Suite("listen: at the edge of its resources", .serialized, .timeLimit(.minutes(5)))
struct ListenEdgeTests {
    /// Under `ulimit -n 64`, 100 clients leave connections the server cannot accept. It
    /// must not spin on `accept` (EMFILE) but pause, say so in one line, keep its CPU
    /// low, and serve again by itself once descriptors are free.
    @Test func outOfDescriptorsTheServerBacksOffSaysSoOnceAndRecovers() throws {
        let child = try ListeningChild(limit: 64)
        defer { child.stop() }
        let port = try child.port()
        var clients: [LoopbackClient] = []
        for _ in 0..<100 {
            let client = try LoopbackClient(port: port)
            client.send(LoopbackClient.upgrade)
            clients.append(client)
        }
        try child.waitForStderr("the back-off line") { $0.contains("cannot accept connections") }
        #expect(child.stderr.contains("too many open files (this process may have 64 open; see ulimit -n)"), "\(child.stderr)")

        // Over two seconds of back-off the server uses little CPU: a spinning accept loop
        // takes all of a core (and logs nothing).
        let before = try child.cpuSeconds()
        Thread.sleep(forTimeInterval: 2)
        let used = try child.cpuSeconds() - before
        #expect(used < 0.4, "the server used \(used) s of CPU in 2 s while it could not accept")
        let pauses = child.stderr.components(separatedBy: "cannot accept connections").count - 1
        #expect(pauses == 1, "\(child.stderr)")

        // The clients leave: their peers close, descriptors free up, and the server,
        // retrying by itself, accepts again and says so.
        clients.removeAll()
        try child.waitForStderr("the recovery line") { $0.contains("accepting connections again") }
        let client = try LoopbackClient(port: port)
        client.send(LoopbackClient.upgrade)
        #expect(client.readHead().hasPrefix("HTTP/1.1 101 "))
        // A masked text frame "hi" comes back as an unmasked one.
        client.send([0x81, 0x82, 1, 2, 3, 4, 0x68 ^ 1, 0x69 ^ 2])
        #expect(client.read(4) == [0x81, 0x02, 0x68, 0x69])
        #expect(child.stderr.components(separatedBy: "cannot accept connections").count - 1 == 1, "\(child.stderr)")
    }

    /// Debian's soft limit (1 024) would stop a load test at about a thousand
    /// connections: every command raises its soft limit to the hard one at start.
    @Test func theSoftDescriptorLimitIsRaisedToTheHardOne() throws {
        let script = try CommandRunner.script("limits.lua", """
            for line in io.lines("/proc/self/limits") do
              local soft, hard = line:match("^Max open files%s+(%d+)%s+(%d+)")
              if soft then print(soft, hard) end
            end
            """)
        let r = try CommandRunner.run(["-c", "ulimit -Sn 100 && exec \"$0\" run \"$1\"", CommandRunner.executable.path, script], tool: "bash")
        #expect(r.status == 0, "\(r.stderr)")
        let fields = r.stdout.split(whereSeparator: \.isWhitespace)
        #expect(fields.count == 2 && fields[0] == fields[1], "\(r.stdout)")
        #expect(fields.first != "100")
    }

    /// A listening socket's accept queue is the system's maximum unless `backlog` says
    /// otherwise (the kernel shows it as Send-Q of a listening socket); 0 is refused.
    @Test func listenBacklogIsTheSystemMaximumUnlessGiven() throws {
        let script = try CommandRunner.script("backlog.lua", """
            local function queue(server)
              local port = server:url():match(":(%d+)/?$")
              local ss = io.popen("ss -ltnH 'sport = :" .. port .. "'")
              local line = ss:read("l")
              ss:close()
              return line:match("^%S+%s+%d+%s+(%d+)")
            end
            local default = assert(mw.listen("ws://127.0.0.1:0/"))
            local small = assert(mw.listen("tcp://127.0.0.1:0", { backlog = 17 }))
            print(queue(default), queue(small))
            print(pcall(mw.listen, "ws://127.0.0.1:0/", { backlog = 0 }))
            default:close() small:close()
            """)
        let r = try CommandRunner.run("run", script)
        #expect(r.status == 0, "\(r.stderr)")
        let somaxconn = try String(contentsOfFile: "/proc/sys/net/core/somaxconn", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "\(somaxconn)\t17", "\(r.stdout)")
        #expect(lines.last?.contains("backlog") == true && lines.last?.hasPrefix("false") == true, "\(r.stdout)")
    }

    /// At every limit from 4 open files up, `moonwire run` either runs the script or says in
    /// words why it cannot start: NIO traps when a loop cannot open its descriptors, so
    /// below what a loop needs the command refuses before making one. Where polling's pipe
    /// is what does not fit, the script runs without it and the warning says so.
    @Test func runAtAnyDescriptorLimitRunsOrSaysWhy() throws {
        let script = try CommandRunner.script("ran.lua", "print(\"ran\")\n")
        var outcomes: [Int: String] = [:]
        for limit in 4...24 {
            let r = try CommandRunner.run(["-c", "ulimit -n \(limit) && exec \"$0\" run \"$1\"", CommandRunner.executable.path, script], tool: "bash")
            let said = r.stderr.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!said.contains("Fatal error") && !said.contains("Assertion failed") && !said.contains("Backtracing"), "ulimit -n \(limit): \(said)")
            if r.status == 0 {
                #expect(r.stdout == "ran\n", "ulimit -n \(limit): \(r.stdout)")
                outcomes[limit] = said.isEmpty ? "ran" : "ran, warned"
            } else {
                #expect(r.status == 1 && !said.isEmpty, "ulimit -n \(limit): exit \(r.status), \(said)")
                outcomes[limit] = said.hasPrefix("cannot start: ") ? "refused" : "failed in words"
            }
        }
        #expect(outcomes[4] == "refused", "\(outcomes)")
        #expect(outcomes[24] == "ran", "\(outcomes)")
    }

    /// A dial refused for want of descriptors names the limit, as the server's accept does.
    @Test func aDialOutOfDescriptorsNamesTheLimit() throws {
        let script = try CommandRunner.script("many.lua", """
            local server = assert(mw.listen("ws://127.0.0.1:0/"))
            local url = server:url()
            local conns, failed = {}, nil
            for i = 1, 40 do
              local c = mw.connect(url, { reconnect = false })
              c:on_error(function(_, err) failed = failed or err end)
              conns[i] = c
            end
            for _, c in ipairs(conns) do c:wait_open(0.2) end
            print(failed)
            mw.exit(0)
            """)
        let r = try CommandRunner.run(["-c", "ulimit -n 32 && exec \"$0\" run \"$1\"", CommandRunner.executable.path, script], tool: "bash")
        #expect(r.stdout.contains("too many open files (this process may have 32 open; see ulimit -n)"), "\(r.stdout)\n\(r.stderr)")
    }

    /// `listen --echo --send-budget 1M` without a script: a client that sends 8 MiB and
    /// reads nothing gets what the budget takes; past it the echoes are dropped, the
    /// warning names the budget once, and the server still serves a new client.
    @Test func listenWithoutAScriptKeepsItsPeersUnderTheProcessSendBudget() throws {
        let child = try ListeningChild(limit: 1024, extra: ["--send-budget", "1M"])
        defer { child.stop() }
        let port = try child.port()
        let stalled = try LoopbackClient(port: port, receiveBuffer: 4096)
        stalled.send(LoopbackClient.upgrade)
        #expect(stalled.readHead().hasPrefix("HTTP/1.1 101 "))
        // 128 binary frames of 64 000 zero bytes, masked with a zero key.
        let frame = [0x82, 0x80 | 126, UInt8(64_000 >> 8), UInt8(64_000 & 0xFF), 0, 0, 0, 0] + [UInt8](repeating: 0, count: 64_000)
        for _ in 0..<128 { stalled.send(frame) }
        let warning = "the process send budget 1 MiB is reached"
        try child.waitForStderr("the budget's warning") { $0.contains(warning) }

        let client = try LoopbackClient(port: port)
        client.send(LoopbackClient.upgrade)
        #expect(client.readHead().hasPrefix("HTTP/1.1 101 "))
        client.send([0x81, 0x82, 1, 2, 3, 4, 0x68 ^ 1, 0x69 ^ 2])
        #expect(client.read(4) == [0x81, 0x02, 0x68, 0x69])
        #expect(child.stderr.components(separatedBy: warning).count - 1 == 1, "\(child.stderr)")
    }
}

/// `moonwire listen --echo` on a free port under `ulimit -n LIMIT`, its stderr collected.
private final class ListeningChild: @unchecked Sendable {
    private let process = Process()
    private let lock = NSLock()
    private var collected = Data()

    /// `extra`: more options for `listen`.
    init(limit: Int, extra: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", "ulimit -n \(limit) && exec \"$0\" listen --echo \"$@\" ws://127.0.0.1:0/", CommandRunner.executable.path] + extra
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        let err = Pipe()
        process.standardError = err
        err.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.withLock { self.collected += data }
        }
        try process.run()
    }

    var stderr: String { lock.withLock { String(decoding: collected, as: UTF8.self) } }

    /// Waits (up to 20 s) until stderr satisfies `condition`.
    func waitForStderr(_ what: String, until condition: (String) -> Bool) throws {
        let deadline = Date().addingTimeInterval(20)
        while !condition(stderr) {
            guard Date() < deadline, process.isRunning else {
                throw PeerError("no \(what) on the server's stderr: \(stderr)")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    func port() throws -> Int {
        var port: Int?
        try waitForStderr("listening line") { text in
            guard let range = text.range(of: "listening on ws://127.0.0.1:") else { return false }
            port = Int(text[range.upperBound...].prefix { $0.isNumber })
            return port != nil
        }
        return port!
    }

    /// User and system CPU time of the server so far (/proc/PID/stat).
    func cpuSeconds() throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8)
        // Fields after the command name, which is in parentheses: utime and stime are
        // the 14th and 15th fields, the 12th and 13th after it.
        guard let close = stat.lastIndex(of: ")") else { throw PeerError("unreadable /proc stat: \(stat)") }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw PeerError("unreadable /proc stat: \(stat)")
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// A blocking client socket on 127.0.0.1 with a 10 s receive and send timeout; closed when freed.
private final class LoopbackClient {
    static let upgrade = Array("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".utf8)
    private let fd: Int32

    /// `receiveBuffer`: a small kernel receive buffer, so that little of what is sent to
    /// a client that does not read stays in the kernel.
    init(port: Int, receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw PeerError("connect failed: errno \(errno)")
        }
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Up to `count` bytes, fewer at EOF or after the timeout.
    func read(_ count: Int) -> [UInt8] {
        var out: [UInt8] = []
        var byte: UInt8 = 0
        while out.count < count, recv(fd, &byte, 1, 0) == 1 { out.append(byte) }
        return out
    }

    /// The response head, up to its blank line.
    func readHead() -> String {
        var out: [UInt8] = []
        var byte: UInt8 = 0
        while !out.suffix(4).elementsEqual([13, 10, 13, 10]), recv(fd, &byte, 1, 0) == 1 { out.append(byte) }
        return String(decoding: out, as: UTF8.self)
    }
}
