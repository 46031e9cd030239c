import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Writes a recording (docs/recording.md): one JSON line of header, then one line
/// per event of every connection given to it. Each line goes to the file in one
/// `write(2)` with no buffer in between, so a killed process leaves every event
/// up to the last one readable. Safe to share between threads (`run --workers`).
///
/// ```swift
/// let session = try SessionRecorder(path: "session.jsonl", toolVersion: "0.1.0", url: "ws://127.0.0.1:9000/")
/// connection.recorder = session.connection(url: "ws://127.0.0.1:9000/", headers: headers)
/// ```
public final class SessionRecorder: @unchecked Sendable {
    /// The format's version, in every header; readers refuse others.
    public static let formatVersion = 1

    public let path: String
    public let recordSecrets: Bool
    private let fd: Int32
    private let started = NIODeadline.now()
    private let lock = NSLock()
    private var nextConnection = 1
    private var failed = false

    /// Creates (or truncates) `path` and writes the header. `url` and `headers`
    /// describe the session when it is one connection (nil for `run --record`).
    public init(path: String, toolVersion: String, url: String? = nil, headers: [(String, String)] = [], recordSecrets: Bool = false) throws(RecordingError) {
        self.path = path
        self.recordSecrets = recordSecrets
        fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw RecordingError(file: path, line: nil, message: "cannot write: \(String(cString: strerror(errno)))") }
        var header = JSONLine()
        header.add("moonwire_recording", Self.formatVersion)
        header.add("moonwire", toolVersion)
        header.add("started", Self.timestamp(Date()))
        header.add("url", url.map { recordSecrets ? $0 : Redaction.url($0) })
        header.add("headers", redacted(headers))
        header.add("secrets", recordSecrets ? "recorded" : "redacted")
        write(header)
    }

    deinit { Glibc.close(fd) }

    /// A new connection of the session: its events go to the file under the next id (1, 2, ...).
    public func connection(url: String, headers: [(String, String)] = []) -> ConnectionRecorder {
        lock.lock()
        let id = nextConnection
        nextConnection += 1
        lock.unlock()
        return ConnectionRecorder(session: self, id: id, url: recordSecrets ? url : Redaction.url(url), headers: redacted(headers))
    }

    func redacted(_ headers: [(String, String)]) -> [(String, String)] {
        recordSecrets ? headers : headers.map { ($0.0, Redaction.isSecret(header: $0.0) ? Redaction.mark : $0.1) }
    }

    /// Seconds since the recorder was made.
    var offset: Double { Double((NIODeadline.now() - started).nanoseconds) / 1e9 }

    func write(_ line: JSONLine) {
        var bytes = Array(line.finished().utf8)
        bytes.append(UInt8(ascii: "\n"))
        lock.lock()
        defer { lock.unlock() }
        guard !failed else { return }
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            // A full disk: the recording stops there; what is written stays whole lines.
            guard n > 0 else {
                failed = true
                return
            }
            done += n
        }
    }

    static func timestamp(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: date)
    }
}

/// One connection's tap into a ``SessionRecorder``; ``ManagedConnection/recorder`` calls it.
public final class ConnectionRecorder: @unchecked Sendable {
    public let id: Int
    private let session: SessionRecorder
    private let url: String
    private let headers: [(String, String)]

    init(session: SessionRecorder, id: Int, url: String, headers: [(String, String)]) {
        self.session = session
        self.id = id
        self.url = url
        self.headers = headers
    }

    /// `at`: the event's time (an import knows it); else now.
    private func line(_ event: String, at time: Double? = nil) -> JSONLine {
        var line = JSONLine()
        line.add("t", ((time ?? session.offset) * 1e6).rounded() / 1e6)
        line.add("c", id)
        line.add("event", event)
        return line
    }

    public func opened(subprotocol: String?, extensions: String?, reconnects: Int, at time: Double? = nil) {
        var l = line("open", at: time)
        l.add("url", url)
        l.add("protocol", subprotocol)
        l.add("extensions", extensions)
        l.add("headers", headers)
        l.add("reconnects", reconnects)
        session.write(l)
    }

    public func message(_ data: ByteBuffer, kind: MessageKind, outgoing: Bool) {
        data.withUnsafeReadableBytes { message($0, kind: kind, outgoing: outgoing) }
    }

    func message<Bytes: Collection>(_ bytes: Bytes, kind: MessageKind, outgoing: Bool, at time: Double? = nil) where Bytes.Element == UInt8 {
        var l = line("message", at: time)
        l.add("dir", outgoing ? "out" : "in")
        l.add("kind", kind.description)
        if kind == .text, let text = String(validating: bytes, as: UTF8.self) {
            l.add("data", text)
        } else {
            // Text that is not UTF-8 (a server that breaks the rules) is kept as it was.
            if kind == .text { l.add("encoding", "base64") }
            l.add("data", BinaryText.base64(bytes))
        }
        session.write(l)
    }

    public func control(_ event: String, payload: ByteBuffer, outgoing: Bool) {
        var l = line(event)
        l.add("dir", outgoing ? "out" : "in")
        l.add("data", payload.withUnsafeReadableBytes { BinaryText.base64($0) })
        session.write(l)
    }

    public func closed(code: UInt16, reason: String, by: String, clean: Bool, willReconnect: Bool) {
        var l = line("close")
        l.add("code", Int(code))
        l.add("reason", reason)
        l.add("by", by)
        l.add("clean", clean)
        l.add("will_reconnect", willReconnect)
        session.write(l)
    }

    public func failed(_ message: String) {
        var l = line("error")
        l.add("message", message)
        session.write(l)
    }

    public func reconnecting(attempt: Int, delay: Double) {
        var l = line("reconnect")
        l.add("attempt", attempt)
        l.add("delay", delay)
        session.write(l)
    }
}

/// What a recording leaves out unless asked to keep secrets.
enum Redaction {
    static let mark = "[redacted]"
    private static let secretWords = ["auth", "cookie", "token", "secret", "password", "passwd", "key", "session", "signature", "sig", "credential"]

    static func isSecret(header name: String) -> Bool {
        let n = name.lowercased()
        return secretWords.contains { n.contains($0) }
    }

    /// Query parameters whose name looks like a secret keep their name, not their value;
    /// a password before the host becomes `***`.
    static func url(_ url: String) -> String {
        let text = Credentials.redacted(url)
        guard let q = text.firstIndex(of: "?") else { return text }
        let query = text[text.index(after: q)...].split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, isSecret(header: String(parts[0])) else { return String(pair) }
            return "\(parts[0])=REDACTED"
        }
        return text[...q] + query.joined(separator: "&")
    }
}

/// A JSON object written key by key, in the order given (people read these files).
struct JSONLine {
    private var text = "{"
    private var empty = true

    mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        self.key(key)
        Self.quote(value, into: &text)
    }

    mutating func add(_ key: String, _ value: Int) {
        self.key(key)
        text += String(value)
    }

    mutating func add(_ key: String, _ value: Double) {
        self.key(key)
        text += value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    mutating func add(_ key: String, _ value: Bool) {
        self.key(key)
        text += value ? "true" : "false"
    }

    mutating func add(_ key: String, _ pairs: [(String, String)]) {
        self.key(key)
        text += "{"
        for (i, (name, value)) in pairs.enumerated() {
            if i > 0 { text += "," }
            Self.quote(name, into: &text)
            text += ":"
            Self.quote(value, into: &text)
        }
        text += "}"
    }

    private mutating func key(_ key: String) {
        if !empty { text += "," }
        empty = false
        Self.quote(key, into: &text)
        text += ":"
    }

    func finished() -> String { text + "}" }

    static func quote(_ s: String, into out: inout String) {
        out += LogLine.jsonString(s)
    }
}

/// A bad recording or HAR file: where, and what is wrong.
public struct RecordingError: Error, CustomStringConvertible {
    public var file: String
    public var line: Int?
    public var message: String

    public init(file: String, line: Int?, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String {
        line.map { "\(file):\($0): \(message)" } ?? "\(file): \(message)"
    }
}
