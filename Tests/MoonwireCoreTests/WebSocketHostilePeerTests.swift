import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import MoonwireCore

/// What the hostile peer saw from the client after the handshake.
struct PeerReport: Sendable {
    var closeCodes: [UInt16?] = []
    var pongs: [[UInt8]] = []
    /// Seconds from the handshake to the client's first close frame.
    var closeAfter: Double?
}

/// A raw TCP server that completes the WebSocket upgrade by hand and then writes
/// hand-made frames, to see how the client copes with a peer that breaks the rules.
final class HostilePeer: Sendable {
    enum Step: Sendable {
        case send([UInt8])
        case wait(TimeAmount)
    }

    let channel: Channel
    let report: EventLoopFuture<PeerReport>
    var port: Int { self.channel.localAddress!.port! }

    private init(channel: Channel, report: EventLoopFuture<PeerReport>) {
        self.channel = channel
        self.report = report
    }

    /// `closeOnClientClose` false makes a peer that never finishes the close handshake;
    /// `response` replaces the 101 (empty: never answer); `extraResponseHeaders` are added to it.
    static func start(
        _ steps: [Step],
        closeOnClientClose: Bool = true,
        response: String? = nil,
        extraResponseHeaders: String = ""
    ) async throws -> HostilePeer {
        let loop = TestClient.group.next()
        let report = loop.makePromise(of: PeerReport.self)
        let channel = try await ServerBootstrap(group: loop)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = HostileHandler(
                        steps: steps,
                        report: report,
                        closeOnClientClose: closeOnClientClose,
                        response: response,
                        extraResponseHeaders: extraResponseHeaders
                    )
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return HostilePeer(channel: channel, report: report.futureResult)
    }

    func stop() async {
        try? await self.channel.close()
    }
}

private final class HostileHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var steps: [HostilePeer.Step]
    private let promise: EventLoopPromise<PeerReport>
    private var inbound = ByteBuffer()
    private var upgraded = false
    private var upgradedAt = NIODeadline.now()
    private var report = PeerReport()

    private let closeOnClientClose: Bool
    private let response: String?
    private let extraResponseHeaders: String

    init(
        steps: [HostilePeer.Step],
        report: EventLoopPromise<PeerReport>,
        closeOnClientClose: Bool,
        response: String?,
        extraResponseHeaders: String
    ) {
        self.steps = steps
        self.promise = report
        self.closeOnClientClose = closeOnClientClose
        self.response = response
        self.extraResponseHeaders = extraResponseHeaders
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = self.unwrapInboundIn(data)
        self.inbound.writeBuffer(&bytes)
        if !self.upgraded {
            let text = String(buffer: self.inbound)
            guard let end = text.range(of: "\r\n\r\n") else { return }
            let key = text.split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { $0.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces) } ?? ""
            let accept = BinaryText.base64(Array(Insecure.SHA1.hash(data: Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))))
            let response = self.response
                ?? "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\(self.extraResponseHeaders)\r\n"
            self.inbound.moveReaderIndex(forwardBy: text[..<end.upperBound].utf8.count)
            self.upgraded = true
            self.upgradedAt = .now()
            if !response.isEmpty {
                context.writeAndFlush(self.wrapOutboundOut(ByteBuffer(string: response)), promise: nil)
            }
            self.runSteps(context: context)
        }
        self.readClientFrames(context: context)
    }

    private func runSteps(context: ChannelHandlerContext) {
        while !self.steps.isEmpty {
            switch self.steps.removeFirst() {
            case .send(let bytes):
                context.writeAndFlush(self.wrapOutboundOut(ByteBuffer(bytes: bytes)), promise: nil)
            case .wait(let delay):
                context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
                    if context.channel.isActive { self.runSteps(context: context) }
                }
                return
            }
        }
    }

    /// Client frames are masked; unmask and note closes and pongs.
    private func readClientFrames(context: ChannelHandlerContext) {
        while true {
            var view = self.inbound
            guard let b0 = view.readInteger(as: UInt8.self), let b1 = view.readInteger(as: UInt8.self) else { return }
            var length = Int(b1 & 0x7F)
            if length == 126 {
                guard let l = view.readInteger(as: UInt16.self) else { return }
                length = Int(l)
            } else if length == 127 {
                guard let l = view.readInteger(as: UInt64.self) else { return }
                length = Int(l)
            }
            guard let key = view.readBytes(length: 4), let masked = view.readBytes(length: length) else { return }
            self.inbound = view
            let payload = masked.enumerated().map { $0.element ^ key[$0.offset & 3] }
            switch b0 & 0x0F {
            case 0x8:
                let code = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil
                self.report.closeCodes.append(code)
                if self.report.closeAfter == nil {
                    self.report.closeAfter = Double((NIODeadline.now() - self.upgradedAt).nanoseconds) / 1e9
                }
                if self.closeOnClientClose {
                    context.close(promise: nil)
                    return
                }
            case 0xA:
                self.report.pongs.append(payload)
            default:
                break
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.promise.succeed(self.report)
    }
}

@Suite("WebSocket client against a hostile peer", .timeLimit(.minutes(5)))
struct WebSocketHostilePeerTests {
    static let huge: [UInt8] = [0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0]

    @Test(
        "protocol violations close with the RFC code and are reported once",
        arguments: [
            ("masked server frame", [0x81, 0x85, 1, 2, 3, 4, 0x69, 0x67, 0x6F, 0x68, 0x6E], 1002),
            ("reserved bit RSV2", [0xA1, 0x00], 1002),
            ("RSV1 without permessage-deflate", [0xC1, 0x00], 1002),
            ("unknown opcode", [0x83, 0x00], 1002),
            ("control frame > 125 bytes", [0x89, 126, 0x00, 0x7E] + [UInt8](repeating: 0x61, count: 126), 1002),
            ("fragmented control frame", [0x09, 0x00], 1002),
            ("continuation without a message", [0x80, 0x01, 0x61], 1002),
            ("new message inside a fragmented one", [0x01, 0x01, 0x61, 0x81, 0x01, 0x62], 1002),
            ("invalid UTF-8", [0x81, 0x02, 0xC3, 0x28], 1007),
            ("invalid UTF-8 split across fragments", [0x01, 0x02, 0x68, 0xE2, 0x80, 0x02, 0x82, 0x28], 1007),
            ("2^63 length", huge, 1002),
            ("2^62 length, above max_message", [0x82, 127, 0x40, 0, 0, 0, 0, 0, 0, 0], 1009),
            ("invalid close code", [0x88, 0x02, 0x03, 0xED], 1002),
            ("close frame with 1-byte payload", [0x88, 0x01, 0x03], 1002),
            ("close reason not UTF-8", [0x88, 0x03, 0x03, 0xE8, 0xFF], 1007),
        ] as [(String, [UInt8], UInt16)]
    )
    func violation(name: String, bytes: [UInt8], code: UInt16) async throws {
        let peer = try await HostilePeer.start([.send(bytes)])
        defer { Task { await peer.stop() } }
        let events = try await TestClient.run("ws://127.0.0.1:\(peer.port)/")
        let report = try await peer.report.get()

        let failures = events.compactMap { e -> ConnectionError? in
            if case .fail(let error) = e { return error }
            return nil
        }
        let closes = events.compactMap { e -> CloseInfo? in
            if case .close(let info) = e { return info }
            return nil
        }
        #expect(failures.count == 1, "\(name): \(events)")
        #expect(failures.first?.step == .protocol && failures.first?.closeCode == code, "\(name): \(failures)")
        #expect(closes.count == 1, "\(name): \(events)")
        #expect(closes.first?.code == code && closes.first?.initiator == .local && closes.first?.clean == false)
        #expect(report.closeCodes == [code], "\(name): the client sent \(report.closeCodes)")
    }

    @Test("invalid UTF-8 fails fast, before the fragmented message ends")
    func failFast() async throws {
        let peer = try await HostilePeer.start([
            .send([0x01, 0x05] + Array("hello".utf8)),
            .send([0x00, 0x03, 0xCE, 0xBA, 0xFF]),
            .wait(.seconds(3)),
            .send([0x80, 0x01, 0x61]),
        ])
        defer { Task { await peer.stop() } }
        let events = try await TestClient.run("ws://127.0.0.1:\(peer.port)/")
        let report = try await peer.report.get()
        #expect(report.closeCodes == [1007])
        #expect((report.closeAfter ?? 99) < 1.0, "closed after \(report.closeAfter ?? -1) s")
        #expect(events.filter { if case .fail = $0 { true } else { false } }.count == 1)
    }

    @Test("the same violation inside one frame that arrives in chops also fails fast")
    func failFastChops() async throws {
        let payload = Array("κόσμε".utf8) + [0xED, 0xA0, 0x80] + Array("edited".utf8)
        let header: [UInt8] = [0x81, UInt8(payload.count)]
        let peer = try await HostilePeer.start([
            .send(header + payload[..<8]),
            .send(Array(payload[8..<14])),
            .wait(.seconds(3)),
            .send(Array(payload[14...])),
        ])
        defer { Task { await peer.stop() } }
        _ = try await TestClient.run("ws://127.0.0.1:\(peer.port)/")
        let report = try await peer.report.get()
        #expect(report.closeCodes == [1007])
        // Failed at the bad bytes, not after the peer's 3 s pause before the rest.
        #expect((report.closeAfter ?? 99) < 2.9)
    }

    @Test("pings are answered, fragments with interleaved control frames assemble, peer close is echoed")
    func wellBehaved() async throws {
        let peer = try await HostilePeer.start([
            .send([0x89, 0x01, 0x70]),
            .send([0x01, 0x03] + Array("hel".utf8) + [0x89, 0x00] + [0x80, 0x02] + Array("lo".utf8)),
            .send([0x88, 0x06, 0x0F, 0xA1] + Array("done".utf8)),
        ])
        defer { Task { await peer.stop() } }
        let events = try await TestClient.run("ws://127.0.0.1:\(peer.port)/")
        let report = try await peer.report.get()
        #expect(events.compactMap(\.text) == ["hello"])
        #expect(events.last == .close(CloseInfo(code: 4001, reason: "done", clean: true, initiator: .peer)))
        #expect(report.pongs == [[0x70], []])
        #expect(report.closeCodes == [4001])
    }

    @Test("a peer that never answers our close is dropped after close_timeout")
    func closeTimeout() async throws {
        let peer = try await HostilePeer.start([], closeOnClientClose: false)
        defer { Task { await peer.stop() } }
        var options = WebSocketClientOptions()
        options.closeTimeout = .milliseconds(300)
        // From our close to the drop, both taken on the loop: the dial before it is not
        // what is measured, nor how long the test's task waits to run again afterwards.
        let closedAt = NIOLockedValueBox<NIODeadline?>(nil)
        let droppedAt = NIOLockedValueBox<NIODeadline?>(nil)
        let events = try await TestClient.run(
            "ws://127.0.0.1:\(peer.port)/",
            options: options,
            script: ClientScript(
                onOpen: { c, _ in
                    closedAt.withLockedValue { $0 = .now() }
                    try? c.close(code: 1000, reason: "bye")
                },
                onClose: { _, _ in droppedAt.withLockedValue { $0 = .now() } }
            )
        )
        #expect(events.count == 2)
        if case .close(let info) = events.last {
            #expect(info.initiator == .local && info.clean == false && info.code == 1006)
        } else {
            Issue.record("no close: \(events)")
        }
        let elapsed = (droppedAt.withLockedValue { $0 } ?? .now()) - (closedAt.withLockedValue { $0 } ?? .now())
        // Not before close_timeout; the upper bound only catches a drop that never comes.
        #expect(elapsed >= .milliseconds(300) && elapsed < .seconds(10))
    }

    @Test("a closed connection can be dialled again from its didClose")
    func redial() async throws {
        let peer = try await HostilePeer.start([.send([0x88, 0x02, 0x0F, 0xA0])])
        defer { Task { await peer.stop() } }
        let loop = TestClient.group.next()
        let done = loop.makePromise(of: [String].self)
        let url = try WebSocketURL("ws://127.0.0.1:\(peer.port)/")
        try await loop.submit {
            let delegate = RedialDelegate(done: done)
            let connection = ClientConnection(url: url, eventLoop: loop)
            connection.delegate = delegate
            done.futureResult.whenComplete { _ in withExtendedLifetime((delegate, connection)) {} }
            try connection.connect()
        }.get()
        let log = try await done.futureResult.get()
        #expect(log == ["open", "close 4000", "open", "close 4000", "state closed"])
    }
}

private final class RedialDelegate: ClientConnectionDelegate {
    var log: [String] = []
    let done: EventLoopPromise<[String]>
    init(done: EventLoopPromise<[String]>) { self.done = done }
    func connectionDidOpen(_ c: ClientConnection, info: ConnectionOpenInfo) { self.log.append("open") }
    func session(_ c: ClientConnection, didReceive message: ByteBuffer, kind: MessageKind) {}
    func session(_ c: ClientConnection, didFail error: ConnectionError) {
        self.log.append("fail \(error)")
        self.done.succeed(self.log)
    }
    func session(_ c: ClientConnection, didClose info: CloseInfo) {
        self.log.append("close \(info.code)")
        if self.log.count < 4 {
            do { try c.connect() } catch { self.log.append("\(error)") }
        } else {
            self.log.append("state \(c.state.rawValue)")
            self.done.succeed(self.log)
        }
    }
}
