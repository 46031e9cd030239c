#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import NIOCore

/// Binds and listens synchronously, so a server knows its port (and any bind error) the
/// moment it is created, as `mw.listen` must return `url()` and `nil, err` at once; NIO
/// then adopts the listening socket.
enum ListeningSocket {
    /// `backlog`: the accept queue's length; nil asks for the system's maximum, so that a
    /// storm of clients reconnecting at once waits in the queue instead of being turned away.
    /// NIO calls `listen` again when it adopts the socket, with a backlog of 128 whatever
    /// its option says: call ``restoreBacklog(_:_:)`` once it has. The socket has
    /// `TCP_NODELAY`, and on a loopback address the loopback send buffer
    /// (`tunesLoopback`), both of which the sockets it accepts inherit.
    static func open(host: String, port: Int, backlog: Int32? = nil) throws(ServerListenError) -> (handle: NIOBSDSocket.Handle, port: Int, backlog: Int32, tunesLoopback: Bool) {
        let backlog = backlog ?? systemMaximumBacklog
        let where_ = HostPort.format(host: host, port: port)
        let address: SocketAddress
        do {
            address = try SocketAddress.makeAddressResolvingHost(host, port: port)
        } catch {
            throw ServerListenError("cannot resolve '\(host)'")
        }
        #if canImport(Glibc)
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        #else
        let type = SOCK_STREAM
        #endif
        let fd = socket(Int32(address.protocol.rawValue), type, 0)
        guard fd >= 0 else { throw ServerListenError("\(Self.lastError()) (\(where_))") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        // An accepted socket starts with its listening socket's settings: set here once,
        // they cost no system call per connection (a reconnect storm accepts thousands).
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let tunesLoopback = Self.setLoopbackSendBuffer(fd, address)
        let bound = address.withSockAddr { pointer, size in bind(fd, pointer, socklen_t(size)) }
        guard bound == 0, listen(fd, backlog) == 0 else {
            let error = Self.lastError()
            close(fd)
            throw ServerListenError("\(error) (\(where_))")
        }
        return (fd, Self.boundPort(fd) ?? port, backlog, tunesLoopback)
    }

    /// A socket listening on a loopback address only has peers on this host: it gets
    /// ``ChannelTuning/loopbackSendBuffer``, which every socket it accepts inherits.
    /// True if it did; otherwise each accepted channel is tuned by itself.
    private static func setLoopbackSendBuffer(_ fd: Int32, _ address: SocketAddress) -> Bool {
        guard var size = ChannelTuning.loopbackSendBuffer.map(Int32.init), ChannelTuning.isLoopback(address) else { return false }
        return setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size)) == 0
    }

    /// Sets the accept queue of a socket NIO has adopted back to `backlog` (a second
    /// `listen` on a listening socket only changes its queue's length).
    static func restoreBacklog(_ handle: NIOBSDSocket.Handle, _ backlog: Int32) {
        _ = listen(handle, backlog)
    }

    /// Linux's `net.core.somaxconn` (a larger `listen` backlog is cut to it), else SOMAXCONN.
    static let systemMaximumBacklog: Int32 = {
        #if os(Linux)
        if let text = try? String(contentsOfFile: "/proc/sys/net/core/somaxconn", encoding: .utf8),
           let n = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), n > 0 {
            return n
        }
        #endif
        return Int32(SOMAXCONN)
    }()

    private static func boundPort(_ fd: Int32) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
        default:
            return nil
        }
    }

    private static func lastError() -> String {
        String(cString: strerror(errno)).lowercased()
    }
}
