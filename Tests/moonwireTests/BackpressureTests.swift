import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The outbound budget and inbound pause end to end, over real loopback sockets: scripts
/// run by the real executable print what they measured (counts, order, RSS from
/// /proc/self/statm); nothing here depends on how fast the machine is.
@Suite(.timeLimit(.minutes(5))) struct BackpressureTests {
    /// `key=value` pairs of a script's report line.
    static func report(_ line: some StringProtocol) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(line).split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }

    static func fixture(_ name: String) -> String {
        CommandRunner.packageRoot.appendingPathComponent("Tests/moonwireTests/Fixtures/backpressure/\(name)").path
    }

    static func run(_ name: String, _ arguments: String...) throws -> [String: String] {
        let r = try CommandRunner.run(["run", fixture(name)] + arguments)
        #expect(r.status == 0, "\(r.stderr)")
        let line = r.stdout.split(separator: "\n").last ?? ""
        return report(line)
    }

    /// The 10-second one: a peer paused for 10 s, a client sending 64 KiB messages as
    /// fast as it can. Memory stays bounded, send refuses at the budget, and everything it
    /// accepted arrives once, in order, after the pause.
    @Test func pausedPeerBoundsMemoryAndLosesNothing() throws {
        let r = try Self.run("paused.lua", "10")
        let accepted = try #require(Int(r["accepted"] ?? ""))
        #expect(accepted > 0)
        #expect(Int(r["refused"] ?? "") ?? 0 > 0, "send refuses once the budget is reached: \(r)")
        #expect(r["other"] == "none", "the only refusal is \"queue full\": \(r)")
        #expect(r["received"] == String(accepted), "every accepted message arrives: \(r)")
        #expect(r["in_order"] == "true")
        #expect(r["dropped"] == "0")
        // buffered stays within the 16 MiB budget (plus the one message that found it full).
        #expect(Int(r["max_buffered"] ?? "") ?? .max <= 16 << 20, "\(r)")
        #expect(Double(r["max_rss_mib"] ?? "") ?? .infinity < 100, "RSS stays under 100 MiB: \(r)")
    }

    @Test func dropOldestCountsWhatItDropsAndKeepsTheRestInOrder() throws {
        let r = try Self.run("drop_oldest.lua")
        #expect(r["refused"] == "0", "drop_oldest never refuses: \(r)")
        let dropped = try #require(Int(r["dropped"] ?? ""))
        let received = try #require(Int(r["received"] ?? ""))
        #expect(dropped > 0, "\(r)")
        #expect(dropped + received == 3000, "each message either arrived or was counted dropped: \(r)")
        #expect(r["last"] == "3000", "the newest survives: \(r)")
        #expect(r["in_order"] == "true")
    }

    /// Small messages wait several to a buffer; the count bound, `queued`, `sent`,
    /// `dropped` and close's count still count each message.
    @Test func smallQueuedMessagesCountOneByOne() throws {
        let r = try Self.run("small_queued.lua")
        #expect(r["err"] == "queue_full", "\(r)")
        #expect(r["queued"] == "1024", "the count bound (1024 by default) refused the next one: \(r)")
        let accepted = try #require(Int(r["accepted"] ?? ""))
        #expect(accepted > 1024, "\(r)")
        #expect(r["received"] == String(accepted), "every accepted message arrives: \(r)")
        #expect(r["in_order"] == "true")
        #expect(r["sent"] == String(accepted), "sent counts each message: \(r)")
        #expect(r["dropped"] == "0")
        #expect(r["err2"] == "queue_full" && r["queued2"] == "1024", "\(r)")
        #expect(r["closed"] == "1024" && r["dropped2"] == "1024", "close drops and counts each waiting message: \(r)")
    }

    @Test func tcpSendRefusesAtTheBudgetThenDrainDeliversAll() throws {
        let r = try Self.run("tcp.lua")
        #expect(r["err"] == "queue_full", "\(r)")
        #expect(Int(r["queued"] ?? "") ?? 0 > 0, "\(r)")
        #expect(Int(r["buffered"] ?? "") ?? .max <= 256 * 1024, "\(r)")
        #expect(r["drained"] == "true")
        #expect(r["received"] == r["accepted"], "\(r)")
        #expect(r["in_order"] == "true")
    }

    /// A client that does not read while 100 000 messages come: its inbox pauses the
    /// socket (nothing dropped), the server's sends are refused until it drains.
    @Test func aSlowReaderPausesTheSocketAndLosesNothing() throws {
        let r = try Self.run("slow_reader.lua")
        #expect(r["received"] == "100000", "\(r)")
        #expect(r["in_order"] == "true")
        #expect(Int(r["refused"] ?? "") ?? 0 > 0, "the server saw the backpressure: \(r)")
        #expect(r["sender_done"] == "true")
        #expect(r["dropped"] == "0")
    }

    /// Ten fast clients and one raw socket that never reads: the fast ones get every
    /// broadcast, the stalled one's misses are counted, memory stays bounded; with
    /// `slow_peer = "close"` the stalled one is closed with 1008 "too slow".
    @Test func broadcastToAStalledClient() throws {
        // "ready PORT PORT": the fast clients are in; now the stalled ones.
        var stalled: [Int32] = []
        let run = try CommandRunner.run(["run", Self.fixture("broadcast.lua")]) { stdout in
            var first = Data()
            while !first.contains(0x0A) {
                let chunk = stdout.availableData
                if chunk.isEmpty { break }
                first.append(chunk)
            }
            let ready = String(decoding: first, as: UTF8.self).split(separator: "\n").first ?? ""
            stalled = ready.split(separator: " ").dropFirst().compactMap { Int($0) }.map { Self.stalledWebSocketClient(port: $0) }
            return first
        }
        for fd in stalled where fd >= 0 { close(fd) }
        #expect(stalled.count == 2 && stalled.allSatisfy { $0 >= 0 }, "\(run.stdout)")
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n")
        let r = Self.report(lines.first { $0.hasPrefix("fast_all=") } ?? "")
        #expect(r["fast_all"] == "true", "\(r)")
        #expect(r["ordered"] == "true")
        let dropped = try #require(Int(r["stalled_dropped"] ?? ""))
        let sent = try #require(Int(r["stalled_sent"] ?? ""))
        let queued = try #require(Int(r["stalled_queued"] ?? ""))
        #expect(dropped > 0, "\(r)")
        #expect(sent + queued + dropped == 2000, "every broadcast reached the stalled peer or was counted: \(r)")
        #expect(r["took"] == String(10 * 2000 + sent + queued), "broadcast counts the peers that took it: \(r)")
        #expect(Double(r["max_rss_mib"] ?? "") ?? .infinity < 100, "\(r)")
        let closing = Self.report(lines.first { $0.hasPrefix("closed_with=") } ?? "")
        #expect(closing["closed_with"] == "1008_too_slow", "on_close tells 1008 \"too slow\": \(lines)")
    }

    @Test func badQueueOptionsNameTheOptionAndHugeMessagesAreRefused() throws {
        let path = try CommandRunner.script("queue_options.lua", """
            for _, q in ipairs{ { bytes = 0 }, { limit = -1 }, { limit = 1.5 }, { bytes = "x" } } do
              local ok, err = pcall(mw.connect, "ws://127.0.0.1:9/", { queue = q, reconnect = false })
              print(err)
            end
            print(select(2, pcall(mw.listen, "ws://127.0.0.1:0/", { slow_peer = "kick" })))
            local c = mw.connect("ws://127.0.0.1:9/", { queue = { bytes = 1000, limit = 2 }, reconnect = false })
            print(c:send(string.rep("x", 1001)))
            print(c:send(string.rep("x", 600)), c:send(string.rep("x", 600)))
            local s = c:stats()
            print(s.queued, s.buffered, s.dropped)
            print(c:close())
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 9, "\(r.stdout)")
        guard lines.count == 9 else { return }
        #expect(lines[0].hasSuffix("(opts.queue.bytes: a positive number expected, got 0)"))
        #expect(lines[1].hasSuffix("(opts.queue.limit: a positive number expected, got -1)"))
        #expect(lines[2].hasSuffix("(opts.queue.limit: a positive number expected, got 1.5)"))
        #expect(lines[3].hasSuffix("(opts.queue.bytes: a positive number expected, got string)"))
        #expect(lines[4].contains("opts.slow_peer: \"drop\" or \"close\" expected, got \"kick\""))
        #expect(lines[5] == "nil\tmessage too large")
        #expect(lines[6] == "true\tnil\tqueue full")
        #expect(lines[7] == "1\t600\t0")
        #expect(lines[8] == "1")
    }

    @Test func loadDrainExample() throws {
        let r = try CommandRunner.run("run", "examples/load_drain.lua")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "sent 2000, received 2000, in order: true\nbudget reached: true, drained: true, dropped: 0\n")
        #expect(r.stderr.components(separatedBy: "reached its send budget").count == 2, "warned once: \(r.stderr)")
    }

    /// The process-wide send budget (2 MiB from the script's mw.limits) fills long before
    /// the 8 connections' own budgets (4 MiB each): refused with the process's words, which
    /// still start as the connection's; drain waits for it; everything taken arrives; one
    /// warning, the process's.
    @Test func processBudgetExample() throws {
        let r = try CommandRunner.run("run", "examples/send_budget_process.lua")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            connections 8, sent 3200, received 3200, in order: true, dropped: 0
            refused: true (queue full (process send budget 2 MiB)), budget: 2097152

            """)
        #expect(r.stderr.components(separatedBy: "the process send budget 2 MiB is reached").count == 2, "warned once: \(r.stderr)")
        #expect(!r.stderr.contains("reached its send budget"), "no connection reached its own: \(r.stderr)")
    }

    /// `--send-budget` wins over the script's `mw.limits`.
    @Test func sendBudgetFlag() throws {
        let r = try CommandRunner.run("run", "--send-budget", "1M", "examples/send_budget_process.lua", "4", "200")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasSuffix("refused: true (queue full (process send budget 1 MiB)), budget: 1048576\n"), "\(r.stdout)")
        #expect(r.stderr.components(separatedBy: "the process send budget 1 MiB is reached").count == 2, "warned once: \(r.stderr)")
        let bad = try CommandRunner.run("run", "--send-budget", "lots", "examples/send_budget_process.lua")
        #expect(bad.status != 0 && bad.stderr.contains("--send-budget 'lots' is not a size"), "\(bad.stderr)")
        let test = try CommandRunner.run("test", "--send-budget", "3M", Self.fixture("send_budget_test.lua"))
        #expect(test.status == 0, "moonwire test gives the file the budget: \(test.stdout)")
    }

    /// A server's peers charge the process's budget too: broadcasts a peer cannot take are
    /// counted in its `dropped`, `peer:send` is refused with the process's words, and once
    /// the clients read the peers drain and every broadcast taken arrives.
    @Test func processBudgetForAServersPeers() throws {
        let r = try CommandRunner.run("run", Self.fixture("process_budget.lua"))
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 6, "\(r.stdout)")
        guard lines.count == 6 else { return }
        #expect(lines[0] == "true", "the default is above 0, at most 1 GiB")
        #expect(lines[1].hasSuffix("(limits.send_budget: integer of at least 0 expected, got number)"))
        #expect(lines[2] == "1048576")
        #expect(lines[3] == "nil\tqueue full (process send budget 1 MiB)")
        #expect(lines[4] == "true\ttrue\ttrue", "broadcasts taken or counted dropped")
        #expect(lines[5] == "true\ttrue", "every broadcast a peer took arrived")
        #expect(r.stderr.components(separatedBy: "the process send budget 1 MiB is reached").count == 2, "warned once: \(r.stderr)")
    }

    /// Connects, sends a WebSocket upgrade request and never reads: a receive buffer of
    /// 4 KiB, so the kernel holds little for it.
    static func stalledWebSocketClient(port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var size: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            return -1
        }
        let request = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        _ = request.withCString { write(fd, $0, strlen($0)) }
        return fd
    }
}
