import Foundation
import NIOCore
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
}
