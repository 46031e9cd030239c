import Foundation
import NIOCore
import NIOEmbedded
import Testing
@testable import MoonwireCore

/// Replays the fuzzers' seed corpora and kept crash inputs (Fuzz/corpus, Fuzz/crashes)
/// through the WebSocket inbound path in the ordinary build: whole and one byte per read,
/// each input must end in messages or a 1002/1007/1009 failure, never a crash.
@Suite("fuzz corpus replay", .timeLimit(.minutes(5)))
struct FuzzCorpusTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    static func inputs(_ target: String) -> [[UInt8]] {
        let files = FileManager.default
        var urls: [URL] = []
        let corpus = fuzzDirectory.appendingPathComponent("corpus/\(target)")
        urls += (try? files.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil)) ?? []
        let crashes = fuzzDirectory.appendingPathComponent("crashes")
        urls += ((try? files.contentsOfDirectory(at: crashes, includingPropertiesForKeys: nil)) ?? [])
            .filter { $0.lastPathComponent.hasPrefix(target + "-") }
        // The harness's first byte only chooses read sizes.
        return urls.compactMap { try? Data(contentsOf: $0) }.map { Array($0.dropFirst()) }
    }

    @Test(arguments: [
        ("ws-client", WebSocketRole.client, false), ("ws-server", .server, false),
        ("ws-client-deflate", .client, true), ("ws-server-deflate", .server, true),
    ])
    func webSocketInputs(target: String, role: WebSocketRole, deflate: Bool) throws {
        let inputs = Self.inputs(target)
        #expect(!inputs.isEmpty, "no seeds in Fuzz/corpus/\(target)")
        for input in inputs {
            for readSize in [input.count, 1] {
                let inflater = deflate ? try PerMessageDeflate(parameters: PerMessageDeflateParameters()) : nil
                var inbound = WebSocketInbound(role: role, maxMessage: 64 * 1024, deflate: inflater)
                do {
                    for start in stride(from: 0, to: input.count, by: max(readSize, 1)) {
                        var read = ByteBuffer(bytes: input[start..<min(start + max(readSize, 1), input.count)])
                        while let action = try inbound.next(&read) {
                            if case .message(let message, _) = action { #expect(message.readableBytes <= 64 * 1024) }
                        }
                    }
                } catch {
                    #expect([1002, 1007, 1009].contains(error.code))
                }
            }
        }
    }

    /// The server's upgrade handler over the http-request seeds, whole and in 7-byte reads:
    /// each ends in nothing yet (an unfinished head), one HTTP answer, or a 101 only for a
    /// request the RFC 6455 checks let through, never a crash.
    @Test func httpRequestInputs() throws {
        final class UpgradeAll: WebSocketUpgradeDelegate {
            var upgrades = 0
            func decide(_ request: UpgradeRequest) -> WebSocketServerHandshake.Decision {
                .accept(subprotocol: nil, deflate: PerMessageDeflate.serverAccept(request.headers))
            }
            func upgraded(_ channel: Channel, request: UpgradeRequest, subprotocol: String?, deflate: PerMessageDeflate?, after handshake: WebSocketServerHandshake) throws {
                self.upgrades += 1
            }
        }
        let inputs = Self.inputs("http-request")
        #expect(!inputs.isEmpty, "no seeds in Fuzz/corpus/http-request")
        var answered = 0
        for input in inputs {
            for readSize in [input.count, 7] {
                let channel = EmbeddedChannel()
                let server = UpgradeAll()
                let deadlines = HandshakeDeadlines(timeout: .seconds(10), eventLoop: channel.eventLoop)
                try channel.pipeline.syncOperations.addHandler(
                    WebSocketServerHandshake(server: server, deadlines: deadlines, maxHeaders: 128, maxHeaderBytes: 80 * 1024))
                try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
                for start in stride(from: 0, to: input.count, by: max(readSize, 1)) {
                    do {
                        try channel.writeInbound(ByteBuffer(bytes: input[start..<min(start + max(readSize, 1), input.count)]))
                    } catch {
                        break
                    }
                }
                if let answer = try channel.readOutbound(as: ByteBuffer.self) {
                    answered += 1
                    let text = String(buffer: answer)
                    #expect(text.hasPrefix("HTTP/1.1 "), "\(text.prefix(100))")
                    #expect(text.hasPrefix("HTTP/1.1 101 ") == (server.upgrades == 1), "\(text.prefix(100))")
                } else {
                    #expect(server.upgrades == 0)
                }
                _ = try? channel.finish(acceptAlreadyClosed: true)
            }
        }
        #expect(answered > 0)
    }
}
