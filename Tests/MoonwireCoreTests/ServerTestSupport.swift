#if canImport(Glibc)
import Glibc
#endif
import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import MoonwireCore

/// A server on one loop with a delegate that records everything, for tests.
final class TestServer: MessageServerDelegate, @unchecked Sendable {
    // Everything below is touched on `loop` only; tests read it through `onLoop`.
    let loop: EventLoop
    private(set) var server: MessageServer!
    var connected: [(id: Int, request: ServerPeerRequest)] = []
    var messages: [(id: Int, text: String, kind: MessageKind)] = []
    var closes: [(id: Int, info: CloseInfo, at: NIODeadline)] = []
    var failures: [(id: Int?, error: ConnectionError)] = []
    var acceptPauses: [AcceptPause] = []
    /// Peers whose budget drained (`on_drain`), in order.
    var drains: [Int] = []
    var onConnect: (ServerPeer) -> Void = { _ in }
    var onMessage: (ServerPeer, ByteBuffer, MessageKind) -> Void = { _, _, _ in }

    private init(loop: EventLoop) {
        self.loop = loop
    }

    /// Starts a server on `url`; `echo` sends every message back.
    static func start(_ url: String, options: MessageServerOptions = MessageServerOptions(), echo: Bool = false) async throws -> TestServer {
        let loop = TestClient.group.next()
        let test = TestServer(loop: loop)
        try await loop.submit {
            test.server = try MessageServer(url: ServerURL(url), options: options, eventLoop: loop)
            test.server.delegate = test
            if echo { test.onMessage = { peer, message, kind in try? peer.send(message, kind: kind) } }
        }.get()
        return test
    }

    var port: Int { self.server.url.port }

    /// Runs `body` on the server's loop.
    func onLoop<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await self.loop.submit(body).get()
    }

    /// Polls `condition` on the loop until it holds, or fails when it still does not hold
    /// `timeout` seconds after the call. The bound only catches an event that never comes:
    /// with the whole suite running on 2 CPUs, a test's task and the loops it shares can
    /// wait seconds for their turn (a good upgrade once took longer than 5 s there).
    /// The condition and the clock are read together on the loop: the test's task can
    /// wait for a thread of the pool (2 here, which other tests block in socket reads and
    /// child processes) longer than the bound, and an answer taken before that wait must
    /// not be judged by the clock after it (a peer connected long before once failed
    /// "timed out waiting for peer 2" that way).
    func wait(_ what: String, timeout: Double = 30, until condition: @escaping @Sendable (TestServer) -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let (holds, late) = try await self.onLoop { (condition(self), Date() > deadline) }
            if holds { return }
            if late { throw PeerError(message: "timed out waiting for \(what)") }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
    }

    /// Closes the server and waits until every peer is gone.
    func stop() async throws {
        try await self.onLoop { self.server.close() }.get()
    }

    func peer(_ id: Int) -> ServerPeer? { self.server.peers.first { $0.id == id } }

    func server(_ server: MessageServer, didConnect peer: ServerPeer, request: ServerPeerRequest) {
        self.connected.append((peer.id, request))
        self.onConnect(peer)
    }

    func session(_ peer: ServerPeer, didReceive message: ByteBuffer, kind: MessageKind) {
        self.messages.append((peer.id, String(buffer: message), kind))
        self.onMessage(peer, message, kind)
    }

    func session(_ peer: ServerPeer, didClose info: CloseInfo) {
        self.closes.append((peer.id, info, .now()))
    }

    func session(_ peer: ServerPeer, didFail error: ConnectionError) {
        self.failures.append((peer.id, error))
    }

    func server(_ server: MessageServer, didFail error: ConnectionError) {
        self.failures.append((nil, error))
    }

    func server(_ server: MessageServer, accepting event: AcceptPause) {
        self.acceptPauses.append(event)
    }

    func server(_ server: MessageServer, peerDidDrain peer: ServerPeer) {
        self.drains.append(peer.id)
    }
}

/// A blocking client socket, so a test controls exactly how bytes are cut into writes.
final class RawSocket {
    private let fd: Int32

    /// Connects to `port` on 127.0.0.1; `receiveBuffer` asks the kernel for a small receive
    /// buffer (a peer that stops reading then holds back little).
    init(port: Int, receiveBuffer: Int32? = nil) throws {
        self.fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer {
            setsockopt(self.fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var one: Int32 = 1
        setsockopt(self.fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(self.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(self.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw PeerError(message: "connect failed: errno \(errno)") }
    }

    deinit { close(self.fd) }

    /// Writes `bytes` in one system call.
    func write(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Writes `bytes` in pieces of `size`, pausing between them so each piece is its own
    /// TCP segment and, usually, its own read on the other side.
    func write(_ bytes: [UInt8], in size: Int, pause: useconds_t = 2000) {
        var offset = 0
        while offset < bytes.count {
            self.write(Array(bytes[offset..<min(offset + size, bytes.count)]))
            offset += size
            usleep(pause)
        }
    }

    /// Reads until `count` bytes arrived (or EOF, an error or 5 s without a byte).
    func read(count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while out.count < count {
            let n = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, min($0.count, count - out.count), 0) }
            guard n > 0 else { break }
            out += buffer[0..<n]
        }
        return out
    }

    /// Reads until EOF (or an error or the 5 s timeout): what arrived, and whether EOF came.
    func readToEnd() -> (bytes: [UInt8], eof: Bool) {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { out += buffer[0..<n] } else { return (out, n == 0) }
        }
    }
}

/// Writes `bytes` to a socket every 100 ms from a thread of its own until stopped: on a
/// loaded machine the cooperative pool that runs the tests in parallel can stall a Task
/// for seconds, a thread is only delayed by the scheduler.
final class ChattyWriter: @unchecked Sendable {
    private let lock = NSLock()
    private var stopped = false
    private let done = DispatchSemaphore(value: 0)

    init(_ socket: RawSocket, _ bytes: [UInt8]) {
        Thread.detachNewThread { [self] in
            while !self.lock.withLock({ self.stopped }) {
                socket.write(bytes)
                Thread.sleep(forTimeInterval: 0.1)
            }
            self.done.signal()
        }
    }

    func stop() {
        self.lock.withLock { self.stopped = true }
        self.done.wait()
    }
}
