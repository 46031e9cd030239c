import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import MoonwireCore

/// What a test client saw, in order.
enum ClientEvent: Sendable, Equatable {
    case open(subprotocol: String?, compressed: Bool)
    case message([UInt8], MessageKind)
    case pong([UInt8])
    case fail(ConnectionError)
    case close(CloseInfo)

    var text: String? {
        if case .message(let bytes, .text) = self { return String(decoding: bytes, as: UTF8.self) }
        return nil
    }
}

extension [ClientEvent] {
    /// Why the connection failed, when that is the last event.
    var failure: ConnectionError? {
        if case .fail(let error) = self.last { return error }
        return nil
    }
}

/// Callbacks a test gives its client; they run on the connection's loop.
struct ClientScript: Sendable {
    var onOpen: @Sendable (ClientConnection, ConnectionOpenInfo) -> Void = { _, _ in }
    var onMessage: @Sendable (ClientConnection, ByteBuffer, MessageKind) -> Void = { _, _, _ in }
    var onClose: @Sendable (ClientConnection, CloseInfo) -> Void = { _, _ in }
}

/// Records every delegate call and finishes when the connection is over.
final class RecordingDelegate: ClientConnectionDelegate {
    var events: [ClientEvent] = []
    let script: ClientScript
    let done: EventLoopPromise<[ClientEvent]>

    init(script: ClientScript, done: EventLoopPromise<[ClientEvent]>) {
        self.script = script
        self.done = done
    }

    func connectionDidOpen(_ c: ClientConnection, info: ConnectionOpenInfo) {
        self.events.append(.open(subprotocol: info.subprotocol, compressed: info.compression != nil))
        self.script.onOpen(c, info)
    }

    func session(_ c: ClientConnection, didReceive message: ByteBuffer, kind: MessageKind) {
        self.events.append(.message(Array(message.readableBytesView), kind))
        self.script.onMessage(c, message, kind)
    }

    func connection(_ c: ClientConnection, didReceivePong payload: ByteBuffer) {
        self.events.append(.pong(Array(payload.readableBytesView)))
    }

    func session(_ c: ClientConnection, didFail error: ConnectionError) {
        self.events.append(.fail(error))
        if c.state == .closed { self.done.succeed(self.events) }
    }

    func session(_ c: ClientConnection, didClose info: CloseInfo) {
        self.events.append(.close(info))
        self.script.onClose(c, info)
        // Let stray late events (there must be none) show up before the test looks.
        c.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(50)) { self.done.succeed(self.events) }
    }
}

enum TestClient {
    static let group = MultiThreadedEventLoopGroup.singleton

    /// Dials `url`, runs `script`, and returns every event once the connection is over.
    static func run(
        _ url: String,
        options: WebSocketClientOptions = WebSocketClientOptions(),
        timeout: TimeAmount = .seconds(20),
        script: ClientScript = ClientScript()
    ) async throws -> [ClientEvent] {
        let loop = group.next()
        let parsed = try WebSocketURL(url)
        let done = loop.makePromise(of: [ClientEvent].self)
        try await loop.submit {
            let delegate = RecordingDelegate(script: script, done: done)
            let connection = ClientConnection(url: parsed, options: options, eventLoop: loop)
            connection.delegate = delegate
            // The connection holds its delegate weakly; keep both until the end.
            done.futureResult.whenComplete { _ in withExtendedLifetime((delegate, connection)) {} }
            let timer = loop.scheduleTask(in: timeout) {
                done.fail(TestTimeout(events: delegate.events))
            }
            done.futureResult.whenComplete { _ in timer.cancel() }
            try connection.connect()
        }.get()
        return try await done.futureResult.get()
    }
}

struct TestTimeout: Error, CustomStringConvertible {
    var events: [ClientEvent]
    var description: String { "test client timed out; events so far: \(events)" }
}

extension ByteBuffer {
    static func text(_ s: String) -> ByteBuffer { ByteBuffer(string: s) }
}
