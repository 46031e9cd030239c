import NIOCore
import NIOPosix
import Testing

@testable import MoonwireCore

/// A connection whose peer is on this host gets a 1 MiB kernel send buffer instead of
/// the kernel's autotuning (ChannelTuning.loopbackSendBuffer); any other keeps the kernel's.
@Suite("Loopback send buffer", .timeLimit(.minutes(5)))
struct LoopbackTuningTests {
    /// What getsockopt(SO_SNDBUF) answers once the tuning applied: the kernel doubles the size asked.
    static var tuned: Int? { ChannelTuning.loopbackSendBuffer.map { $0 * 2 } }

    @Test("loopback addresses are told from the others")
    func loopbackAddresses() throws {
        for ip in ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"] {
            #expect(ChannelTuning.isLoopback(try SocketAddress(ipAddress: ip, port: 80)), "\(ip)")
        }
        for ip in ["10.0.0.1", "192.168.1.127", "::ffff:10.0.0.1", "2001:db8::1", "::"] {
            #expect(!ChannelTuning.isLoopback(try SocketAddress(ipAddress: ip, port: 80)), "\(ip)")
        }
    }

    @Test("both ends of a loopback connection get the smaller send buffer and TCP_NODELAY")
    func bothEnds() async throws {
        final class Held: @unchecked Sendable { var peerSendBuffer: Int?; var peerNoDelay: Int? }
        let held = Held()
        let server = try await TestServer.start("ws://127.0.0.1:0", echo: true)
        try await server.onLoop {
            server.onConnect = { (peer: ServerPeer) -> Void in
                let size: SocketOptionValue? = try? peer.channel.syncOptions?.getOption(ChannelOptions.socketOption(.so_sndbuf))
                held.peerSendBuffer = size
                // The server sets both on its listening socket; an accepted socket inherits them.
                let noDelay: SocketOptionValue? = try? peer.channel.syncOptions?.getOption(ChannelOptions.tcpOption(.tcp_nodelay))
                held.peerNoDelay = noDelay
            }
        }
        let events = try await TestClient.run(
            "ws://127.0.0.1:\(server.port)/",
            script: ClientScript(onOpen: { c, _ in try? c.close() })
        )
        #expect(events.first == .open(subprotocol: nil, compressed: false))
        try await server.wait("the peer's send buffer") { _ in held.peerSendBuffer != nil }

        let loop = TestClient.group.next()
        let port = server.port
        let channel = try await loop.flatSubmit {
            ClientDialer.dial(
                on: loop, host: "127.0.0.1", port: port, proxy: nil, timeout: .seconds(5),
                adopt: { _ in }, configure: { _ in }
            )
        }.get()
        let (clientSendBuffer, clientNoDelay): (SocketOptionValue, SocketOptionValue) = try await loop.submit {
            let options = channel.syncOptions!
            return (try options.getOption(ChannelOptions.socketOption(.so_sndbuf)), try options.getOption(ChannelOptions.tcpOption(.tcp_nodelay)))
        }.get()
        try await channel.close()
        try await server.stop()

        #expect(held.peerNoDelay != nil && held.peerNoDelay != 0)
        #expect(clientNoDelay != 0)
        if let tuned = Self.tuned {
            #expect(held.peerSendBuffer == tuned)
            #expect(clientSendBuffer == tuned)
        } else {
            // net.core.wmem_max is below what would be asked: the kernel's sizing is kept.
            #expect(held.peerSendBuffer != 1 << 20)
            #expect(clientSendBuffer != 1 << 20)
        }
    }
}
