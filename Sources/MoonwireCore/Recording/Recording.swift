import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A recording read back: the header, and what ``RecordingReader`` made of the events.
public struct RecordingHeader {
    public var version: Int
    public var moonwire: String?
    public var started: String?
    public var url: String?
}

/// One message of a recorded connection, as the replay needs it.
public struct RecordedMessage: Equatable {
    /// Seconds since the recording started.
    public var time: Double
    public var outgoing: Bool
    public var kind: MessageKind
    public var data: [UInt8]

    public init(time: Double, outgoing: Bool, kind: MessageKind, data: [UInt8]) {
        self.time = time
        self.outgoing = outgoing
        self.kind = kind
        self.data = data
    }

    /// The data as text, when it is UTF-8.
    public var text: String? { String(validating: data, as: UTF8.self) }
}

/// One client message and the server's messages that followed it, up to the
/// next client message. The first exchange may have no client message: what
/// the server sent on its own after the open (a greeting).
public struct RecordedExchange: Equatable {
    public var number: Int
    public var sent: RecordedMessage?
    public var replies: [RecordedMessage]
}

/// The first session (open to close) of one recorded connection, as exchanges.
public struct RecordedConversation {
    public var header: RecordingHeader
    public var connection: Int
    public var url: String?
    public var subprotocol: String?
    public var openTime: Double
    public var exchanges: [RecordedExchange]
    /// The close, when the server started it: (time, code, reason).
    public var serverClose: (time: Double, code: UInt16, reason: String)?
}

/// Reads a recording line by line (never the whole file), checking every line.
/// Any bad line is an error naming the file and line.
public enum RecordingReader {
    /// Calls `body` with each event line's object, after checking the header.
    public static func forEachLine(path: String, _ body: (_ line: Int, _ object: [String: Any]) throws(RecordingError) -> Void) throws(RecordingError) -> RecordingHeader {
        guard let file = fopen(path, "r") else {
            throw RecordingError(file: path, line: nil, message: "cannot read: \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var buffer: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(buffer) }
        var number = 0
        var header: RecordingHeader?
        while true {
            let n = getline(&buffer, &capacity, file)
            if n < 0 { break }
            number += 1
            let raw = UnsafeRawBufferPointer(start: buffer, count: n)
            let endsWithNewline = n > 0 && raw[n - 1] == UInt8(ascii: "\n")
            let content = Data(raw.prefix(endsWithNewline ? n - 1 : n))
            if content.allSatisfy({ $0 == 32 || $0 == 13 || $0 == 9 }) { continue }
            guard let object = (try? JSONSerialization.jsonObject(with: content)) as? [String: Any] else {
                let why = endsWithNewline ? "not a JSON object" : "cut short (the last line has no end: was the recording killed while writing?)"
                throw RecordingError(file: path, line: number, message: "\(why); a recording has one JSON object per line")
            }
            guard let known = header else {
                header = try Self.header(object, path: path, line: number)
                continue
            }
            _ = known
            try body(number, object)
        }
        guard let header else {
            throw RecordingError(file: path, line: nil, message: "empty; a recording starts with a header line {\"moonwire_recording\":1,...}")
        }
        return header
    }

    static func header(_ object: [String: Any], path: String, line: Int) throws(RecordingError) -> RecordingHeader {
        guard let version = object["moonwire_recording"] as? Int else {
            throw RecordingError(file: path, line: line, message: "not a moonwire recording: the first line has no \"moonwire_recording\" version")
        }
        guard version == SessionRecorder.formatVersion else {
            throw RecordingError(file: path, line: line, message: "recording format version \(version) is not known to this moonwire (it reads version \(SessionRecorder.formatVersion)); use a newer moonwire")
        }
        return RecordingHeader(version: version, moonwire: object["moonwire"] as? String, started: object["started"] as? String, url: object["url"] as? String)
    }

    /// Reads and checks the whole file, keeping the messages of one connection
    /// (`connection`, or the first that has messages) up to its first close.
    public static func conversation(path: String, connection wanted: Int? = nil) throws(RecordingError) -> RecordedConversation {
        var chosen = wanted
        var url: String?
        var subprotocol: String?
        var openTime: Double?
        var messages: [RecordedMessage] = []
        var serverClose: (Double, UInt16, String)?
        var ended = false
        var connections = Set<Int>()
        let header = try forEachLine(path: path) { (line: Int, object: [String: Any]) throws(RecordingError) in
            func fail(_ message: String) -> RecordingError { RecordingError(file: path, line: line, message: message) }
            guard let time = (object["t"] as? NSNumber)?.doubleValue else { throw fail("an event needs \"t\", its time in seconds") }
            guard let c = object["c"] as? Int else { throw fail("an event needs \"c\", its connection number") }
            guard let event = object["event"] as? String else { throw fail("an event needs \"event\" (open, message, close, ...)") }
            connections.insert(c)
            switch event {
            case "message":
                let message = try Self.message(object, time: time, fail: fail)
                if chosen == nil { chosen = c }
                guard c == chosen, !ended else { return }
                if openTime == nil { openTime = time }
                messages.append(message)
            case "open":
                guard chosen == nil || c == chosen, messages.isEmpty, !ended else { return }
                openTime = time
                url = object["url"] as? String
                subprotocol = object["protocol"] as? String
            case "close":
                guard let code = object["code"] as? Int else { throw fail("a close needs \"code\"") }
                guard c == chosen, !ended else { return }
                ended = true
                if (object["by"] as? String) == "peer" { serverClose = (time, UInt16(clamping: code), object["reason"] as? String ?? "") }
            case "ping", "pong", "error", "reconnect":
                break
            default:
                throw fail("unknown event \"\(event)\" (open, message, ping, pong, close, reconnect, error)")
            }
        }
        guard let chosen, !messages.isEmpty else {
            if let wanted { throw RecordingError(file: path, line: nil, message: "connection \(wanted) has no messages (connections: \(connections.sorted().map(String.init).joined(separator: ", ")))") }
            throw RecordingError(file: path, line: nil, message: "no messages recorded: nothing to replay")
        }
        return RecordedConversation(
            header: header, connection: chosen, url: url ?? header.url, subprotocol: subprotocol, openTime: openTime ?? 0,
            exchanges: exchanges(messages), serverClose: serverClose.map { (time: $0.0, code: $0.1, reason: $0.2) }
        )
    }

    /// A `"event":"message"` line's message (its `data` base64-decoded when binary);
    /// `fail` makes the error for what is missing or wrong.
    public static func message(_ object: [String: Any], time: Double, fail: (String) -> RecordingError) throws(RecordingError) -> RecordedMessage {
        guard let dir = object["dir"] as? String, dir == "in" || dir == "out" else { throw fail("a message needs \"dir\": \"in\" or \"out\"") }
        guard let kindName = object["kind"] as? String, kindName == "text" || kindName == "binary" else { throw fail("a message needs \"kind\": \"text\" or \"binary\"") }
        guard let text = object["data"] as? String else { throw fail("a message needs \"data\", a string") }
        let base64 = kindName == "binary" || (object["encoding"] as? String) == "base64"
        let data: [UInt8]
        if base64 {
            do {
                data = try BinaryText.unbase64(text.utf8)
            } catch {
                throw fail("\"data\" is not valid base64 (binary messages are base64)")
            }
        } else {
            data = Array(text.utf8)
        }
        return RecordedMessage(time: time, outgoing: dir == "out", kind: kindName == "text" ? .text : .binary, data: data)
    }

    static func exchanges(_ messages: [RecordedMessage]) -> [RecordedExchange] {
        var result: [RecordedExchange] = []
        for m in messages {
            if m.outgoing {
                result.append(RecordedExchange(number: result.count + 1, sent: m, replies: []))
            } else if result.isEmpty {
                result.append(RecordedExchange(number: 1, sent: nil, replies: [m]))
            } else {
                result[result.count - 1].replies.append(m)
            }
        }
        return result
    }
}
