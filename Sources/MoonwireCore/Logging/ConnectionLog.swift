import Logging
import NIOCore

/// What a connection tells its logger: its events at `debug` (`-v`), every message at
/// `trace` (`-vv`), and each reconnect attempt at `info` (the default level), so that a
/// mistyped URL does not wait in silence.
///
/// ```swift
/// ConnectionLog.message(.outbound, kind: .text, ByteBuffer(string: "hello"))
/// // "> text 5 bytes: hello"
/// ConnectionLog.retry(delay: .milliseconds(2100), attempt: 3, of: 10, after: "connect: connection refused")
/// // "retrying in 2.1 s, attempt 3 of 10: connect: connection refused"
/// ```
public enum ConnectionLog {
    public enum Direction: String, Sendable {
        case outbound = ">"
        case inbound = "<"
    }

    /// How many bytes of a message are shown.
    public static let shownBytes = 64

    /// One message: direction, kind, length and its first bytes (as text when they are
    /// printable UTF-8, else in hex).
    public static func message(_ direction: Direction, kind: MessageKind, _ data: ByteBuffer) -> String {
        let count = data.readableBytes
        let head = data.readableBytesView.prefix(shownBytes)
        let more = count > shownBytes ? "…" : ""
        let printable = head.allSatisfy { $0 >= 0x20 && $0 != 0x7f || $0 == 0x09 }
        let shown: String
        if printable, let text = String(validating: Array(head), as: UTF8.self) {
            shown = text
        } else {
            shown = head.map { byte in
                let hex = String(byte, radix: 16)
                return byte < 16 ? "0" + hex : hex
            }.joined(separator: " ")
        }
        return "\(direction.rawValue) \(kind) \(count) bytes\(count == 0 ? "" : ": ")\(shown)\(more)"
    }

    /// A WebSocket ping or pong: `> ping 8 bytes (heartbeat)`, `< pong 8 bytes`.
    public static func control(_ direction: Direction, _ name: String, _ payload: ByteBuffer, note: String? = nil) -> String {
        "\(direction.rawValue) \(name) \(payload.readableBytes) bytes" + (note.map { " (\($0))" } ?? "")
    }

    /// Why a connection that had opened is being reconnected, for the first retry line:
    /// `closed by the peer: 1001 "going away"`.
    public static func loss(_ report: ConnectionLifecycle.CloseReport) -> String {
        let who: String
        switch report.by {
        case .peer: who = "closed by the peer"
        case .local: who = "closed by moonwire"
        case .network: who = "connection lost"
        }
        return "\(who): \(report.code)" + (report.reason.isEmpty ? "" : " \(report.reason.debugDescription)")
    }

    /// A reconnect attempt about to be scheduled; `attempts` nil for no limit.
    public static func retry(delay: TimeAmount, attempt: Int, of attempts: Int?, after error: String?) -> String {
        let ms = delay.nanoseconds / 1_000_000
        let wait = ms < 100 ? "\(ms) ms" : "\((Double(ms) / 100).rounded() / 10) s"
        let limit = attempts.map { " of \($0)" } ?? ""
        return "retrying in \(wait), attempt \(attempt)\(limit)" + (error.map { ": \($0)" } ?? "")
    }
}
