import Foundation
import NIOCore
import Testing

@testable import MoonwireCore

/// The process-wide send budget over real loopback sockets: the peers of one server, raw TCP
/// clients that stop reading, charge one pool (1 MiB) smaller than the sum of their own
/// budgets (1 MiB each: the channel takes 256 KiB, the rest waits in the queue). The pool
/// turns messages away as a full own budget would; what it took arrives once the clients
/// read.
@Suite(.timeLimit(.minutes(5))) struct SendBudgetPoolTests {
    static let budget = 1 << 20
    static let messageSize = 16 * 1024

    /// Message `index`: its number, then filler up to `messageSize`.
    static func message(_ index: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(index))
        buffer.writeRepeatingByte(0x2E, count: messageSize - 4)
        return buffer
    }

    /// The numbers of the messages in `bytes`, in order.
    static func numbers(_ bytes: [UInt8]) -> [Int] {
        stride(from: 0, to: bytes.count - messageSize + 1, by: messageSize).map { offset in
            bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        }
    }

    /// What the sending loop saw, per peer id.
    struct Sent: Sendable {
        var offered: [Int: Int] = [:]
        var taken: [Int: Int] = [:]
        var bufferedAtRefusal: [Int: Int] = [:]
        var dropped: [Int: Int] = [:]
        var turnedAwayByOwnBudget = 0
        var unexpected: [String] = []
        var mostUsed = 0
        var turnedAway = 0
    }

    /// A raw TCP server whose peers charge a 1 MiB pool, and two clients that do not read
    /// (client i is peer i + 1).
    static func start(overflow: SendQueue<OutboundMessage>.Overflow, ownBudget: Int = budget) async throws -> (TestServer, [RawSocket]) {
        var options = MessageServerOptions(framing: .raw)
        options.queueBytes = ownBudget
        options.overflow = overflow
        let server = try await TestServer.start("tcp://127.0.0.1:0", options: options)
        try await server.onLoop { server.server.sendBudget = SendBudgetPool(budget: Self.budget, eventLoop: server.loop) }
        var clients: [RawSocket] = []
        for count in 1...2 {
            clients.append(try RawSocket(port: server.port, receiveBuffer: 4096))
            try await server.wait("peer \(count)") { $0.connected.count == count }
        }
        return (server, clients)
    }

    /// Sends numbered messages to both peers in turn, on the loop, until `done` says so.
    static func send(_ server: TestServer, until done: @escaping @Sendable (Sent) -> Bool) async throws -> Sent {
        try await server.onLoop {
            var sent = Sent()
            let pool = server.server.sendBudget!
            let peers = server.server.peers.sorted { $0.id < $1.id }
            var rounds = 0
            while !done(sent) && rounds < 20_000 {
                rounds += 1
                for peer in peers {
                    let index = sent.offered[peer.id, default: 0]
                    sent.offered[peer.id] = index + 1
                    let droppedBefore = peer.dropped
                    let offer = try peer.send(Self.message(index))
                    if (offer == .full || peer.dropped > droppedBefore) && !peer.outbound.refusedByPool {
                        sent.turnedAwayByOwnBudget += 1
                    }
                    switch offer {
                    case .sent, .queued:
                        sent.taken[peer.id, default: 0] += 1
                    case .dropped:
                        break
                    case .full:
                        if sent.bufferedAtRefusal[peer.id] == nil { sent.bufferedAtRefusal[peer.id] = peer.buffered }
                        sent.offered[peer.id] = index  // not taken: offered again
                    case let other:
                        sent.unexpected.append("\(other)")
                    }
                    sent.mostUsed = max(sent.mostUsed, pool.used)
                }
            }
            for peer in peers { sent.dropped[peer.id] = peer.dropped }
            sent.turnedAway = pool.turnedAway
            return sent
        }
    }

    /// Reads what peer `id` was sent from its client and checks it is every message taken
    /// (`taken` of them, numbers in order), then that both peers drain.
    static func readAndDrain(_ server: TestServer, _ clients: [RawSocket], taken: [Int: Int]) async throws -> [Int: [Int]] {
        var received: [Int: [Int]] = [:]
        for (offset, client) in clients.enumerated() {
            let id = offset + 1
            received[id] = Self.numbers(client.read(count: (taken[id] ?? 0) * Self.messageSize))
        }
        try await server.wait("both peers drained") { Set($0.drains) == [1, 2] }
        let after = try await server.onLoop {
            let pool = server.server.sendBudget!
            return (pool.used, pool.waiting, server.server.peers.map(\.outbound.budgetReached))
        }
        #expect(after.0 < Self.budget / 2, "drained: the pool is under half")
        #expect(after.1 == 0)
        #expect(after.2 == [false, false])
        return received
    }

    @Test func refusesPastThePoolWhileEachPeerIsUnderItsOwnBudgetAndLosesNothing() async throws {
        let (server, clients) = try await Self.start(overflow: .error)
        let sent = try await Self.send(server) { $0.bufferedAtRefusal.count == 2 }
        #expect(sent.unexpected.isEmpty, "\(sent.unexpected)")
        #expect(sent.bufferedAtRefusal.count == 2, "both peers refused once the pool was full: \(sent)")
        for (id, buffered) in sent.bufferedAtRefusal {
            #expect(buffered < Self.budget, "peer \(id) was under its own budget: \(buffered)")
        }
        #expect(sent.turnedAwayByOwnBudget == 0, "every refusal was the pool's")
        #expect(sent.mostUsed <= Self.budget, "the pool never passed its budget: \(sent.mostUsed)")
        #expect(sent.turnedAway >= 2)
        #expect(sent.dropped == [1: 0, 2: 0])
        let received = try await Self.readAndDrain(server, clients, taken: sent.taken)
        for id in [1, 2] {
            #expect(received[id] == Array(0..<(sent.taken[id] ?? -1)), "peer \(id): every message taken arrives, once, in order")
        }
        try await server.stop()
    }

    /// With their own 16 MiB budgets the channels take up to 1 MiB before they stop being
    /// writable: here they never do, so no event says when the kernel took their bytes;
    /// the pool asks the channels of the waiting peers until it is under half.
    @Test func drainsWhenTheChannelsEmptyWithoutAWritabilityEvent() async throws {
        let (server, clients) = try await Self.start(overflow: .error, ownBudget: 16 << 20)
        let sent = try await Self.send(server) { $0.bufferedAtRefusal.count == 2 }
        #expect(sent.unexpected.isEmpty && sent.turnedAwayByOwnBudget == 0, "\(sent)")
        #expect(sent.bufferedAtRefusal.values.allSatisfy { $0 < 1 << 20 }, "each channel under its high water mark: \(sent)")
        let received = try await Self.readAndDrain(server, clients, taken: sent.taken)
        for id in [1, 2] {
            #expect(received[id] == Array(0..<(sent.taken[id] ?? -1)), "peer \(id): every message taken arrives, once, in order")
        }
        try await server.stop()
    }

    @Test func dropOldestCountsWhatThePoolDropsAndDeliversTheRest() async throws {
        let (server, clients) = try await Self.start(overflow: .dropOldest)
        // 48 MiB to each peer: far more than the kernel's buffers and the pool hold.
        let sent = try await Self.send(server) { $0.offered.count == 2 && $0.offered.values.min() ?? 0 >= 3000 }
        #expect(sent.unexpected.isEmpty, "\(sent.unexpected)")
        #expect(sent.bufferedAtRefusal.isEmpty, "drop_oldest never refuses")
        #expect(sent.turnedAwayByOwnBudget == 0, "every drop was the pool's")
        #expect(sent.mostUsed <= Self.budget, "the pool never passed its budget: \(sent.mostUsed)")
        var kept: [Int: Int] = [:]
        for id in [1, 2] {
            let dropped = sent.dropped[id] ?? 0
            #expect(dropped > 0, "peer \(id) dropped for the pool: \(sent)")
            kept[id] = (sent.offered[id] ?? 0) - dropped
        }
        let received = try await Self.readAndDrain(server, clients, taken: kept)
        for id in [1, 2] {
            let numbers = received[id] ?? []
            #expect(numbers.count == kept[id], "peer \(id): every message offered arrived or was counted dropped")
            #expect(zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 }, "peer \(id): in order, none twice")
            #expect(numbers.last == 2999, "peer \(id): the oldest were dropped for the newest")
        }
        try await server.stop()
    }
}
