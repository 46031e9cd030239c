import Foundation
import MoonwireCore
import MoonwireLua

/// `moonwire replay FILE [--show]`: the recording read line by line and printed for
/// people, one event a line (`0.0032 [1] < {"op":"hello"}`): `>` what was sent, `<`
/// what came in; binary messages decoded by the console codec (`--proto`, `--msgpack`,
/// `--cbor`) or else as hex. The file is not changed: its bytes are only shown.
struct ReplayShow {
    var codec: ConsoleCodec?
    /// Only this connection's events (nil: every connection's).
    var connection: Int?

    /// Prints each event of `path`; a bad line is a RecordingError (printed lines stay).
    func run(path: String, write: (String) -> Void) throws(RecordingError) {
        _ = try RecordingReader.forEachLine(path: path) { (line: Int, object: [String: Any]) throws(RecordingError) in
            func fail(_ message: String) -> RecordingError { RecordingError(file: path, line: line, message: message) }
            guard let time = (object["t"] as? NSNumber)?.doubleValue else { throw fail("an event needs \"t\", its time in seconds") }
            guard let c = object["c"] as? Int else { throw fail("an event needs \"c\", its connection number") }
            guard let event = object["event"] as? String else { throw fail("an event needs \"event\" (open, message, close, ...)") }
            guard connection == nil || connection == c else { return }
            let head = String(format: "%.4f", time) + " [\(c)] "
            if event == "message" {
                let message = try RecordingReader.message(object, time: time, fail: fail)
                write(head + (message.outgoing ? "> " : "< ") + text(of: message))
            } else {
                write(head + Self.describe(event, object))
            }
        }
    }

    /// A message as text: decoded with the codec when binary, as hex when binary and no
    /// codec is given (or it does not decode: the reason, then the bytes), else the text.
    func text(of message: RecordedMessage) -> String {
        guard message.kind == .binary else { return TerminalText.printable(String(decoding: message.data, as: UTF8.self)) }
        return Self.binaryText(message.data, codec: codec)
    }

    /// A binary message as text: decoded with `codec`, or as hex (after the reason when
    /// it does not decode). `replay --serve/--client` show binary messages so too.
    static func binaryText(_ bytes: [UInt8], codec: ConsoleCodec?) -> String {
        guard let codec else { return "binary, \(bytes.count) bytes: " + BinaryText.hex(bytes) }
        switch codec.text(of: bytes) {
        case .success(let text): return text
        case .failure(let error): return "\(error); \(bytes.count) bytes: " + BinaryText.hex(bytes)
        }
    }

    /// An event other than a message, in words.
    static func describe(_ event: String, _ object: [String: Any]) -> String {
        switch event {
        case "open":
            var line = "open " + (object["url"] as? String ?? "")
            if let p = object["protocol"] as? String { line += " (subprotocol \(p))" }
            return line
        case "close":
            let code = UInt16(clamping: object["code"] as? Int ?? 1005)
            let by = (object["by"] as? String).map { " by \($0)" } ?? ""
            return "closed " + MessageText.describeClose(code: code, reason: object["reason"] as? String ?? "") + by
        case "reconnect":
            let attempt = (object["attempt"] as? Int).map { " \($0)" } ?? ""
            let delay = (object["delay"] as? NSNumber).map { " in \($0.doubleValue) s" } ?? ""
            return "reconnect" + attempt + delay
        case "error":
            return "error: " + (object["message"] as? String ?? "")
        default:
            let dir = (object["dir"] as? String).map { $0 == "out" ? " sent" : " received" } ?? ""
            return event + dir
        }
    }
}
