import Foundation

/// Turns a browser's HAR export (Chrome and Firefox keep a WebSocket's frames in
/// `_webSocketMessages`) into a recording: each WebSocket entry becomes a
/// connection with an open event and its messages.
///
/// A HAR file is one JSON document, so it is read whole (browsers write them
/// in the megabytes); the recording is written line by line.
public enum HARImport {
    /// Writes the recording to `output`; returns how many connections and messages it holds.
    @discardableResult
    public static func convert(har path: String, to output: String, toolVersion: String, recordSecrets: Bool = false) throws(RecordingError) -> (connections: Int, messages: Int) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw RecordingError(file: path, line: nil, message: "cannot read: \(error.localizedDescription)")
        }
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw RecordingError(file: path, line: lineOfJSONError(error, in: data), message: "not a HAR file: it is not valid JSON")
        }
        guard let log = (root as? [String: Any])?["log"] as? [String: Any], let entries = log["entries"] as? [[String: Any]] else {
            throw RecordingError(file: path, line: nil, message: "not a HAR file: no log.entries")
        }
        let sockets = entries.filter { ($0["_webSocketMessages"] as? [Any])?.isEmpty == false }
        guard !sockets.isEmpty else {
            throw RecordingError(file: path, line: nil, message: "no WebSocket messages: none of its \(entries.count) entries has _webSocketMessages (export from DevTools' Network panel after the WebSocket traffic, with 'Save all as HAR with content')")
        }
        // Everything is checked before the output is created.
        var parsed: [(url: String, headers: [(String, String)], subprotocol: String?, start: Double, messages: [(Double, Bool, Bool, String)])] = []
        for (i, entry) in sockets.enumerated() {
            func fail(_ m: String) -> RecordingError { RecordingError(file: path, line: nil, message: "WebSocket entry \(i + 1): \(m)") }
            guard let request = entry["request"] as? [String: Any], let url = request["url"] as? String else { throw fail("no request.url") }
            let headers = ((request["headers"] as? [[String: Any]]) ?? []).compactMap { h -> (String, String)? in
                guard let n = h["name"] as? String, let v = h["value"] as? String, !n.hasPrefix(":") else { return nil }
                return (n, v)
            }
            let response = ((entry["response"] as? [String: Any])?["headers"] as? [[String: Any]]) ?? []
            let subprotocol = response.first { ($0["name"] as? String)?.lowercased() == "sec-websocket-protocol" }?["value"] as? String
            var messages: [(Double, Bool, Bool, String)] = []
            for (j, raw) in (entry["_webSocketMessages"] as! [Any]).enumerated() {
                guard let m = raw as? [String: Any], let type = m["type"] as? String, type == "send" || type == "receive",
                    let time = (m["time"] as? NSNumber)?.doubleValue, let opcode = m["opcode"] as? Int, let text = m["data"] as? String
                else { throw fail("message \(j + 1) is not {type: send|receive, time, opcode, data}") }
                guard opcode == 1 || opcode == 2 else { continue }
                if opcode == 2, (try? BinaryText.unbase64(text.utf8)) == nil { throw fail("message \(j + 1): binary data is not valid base64") }
                messages.append((time, type == "send", opcode == 2, text))
            }
            let start = (entry["startedDateTime"] as? String).flatMap(parseDate)?.timeIntervalSince1970 ?? messages.first?.0 ?? 0
            parsed.append((url, headers, subprotocol, min(start, messages.first?.0 ?? start), messages))
        }
        let origin = parsed.map(\.start).min() ?? 0
        let recorder = try SessionRecorder(path: output, toolVersion: toolVersion, url: parsed[0].url, headers: parsed[0].headers, recordSecrets: recordSecrets)
        var count = 0
        for socket in parsed {
            let c = recorder.connection(url: socket.url, headers: socket.headers)
            c.opened(subprotocol: socket.subprotocol, extensions: nil, reconnects: 0, at: socket.start - origin)
            for (time, outgoing, binary, text) in socket.messages {
                let bytes = binary ? (try? BinaryText.unbase64(text.utf8)) ?? [] : Array(text.utf8)
                c.message(bytes, kind: binary ? .binary : .text, outgoing: outgoing, at: time - origin)
                count += 1
            }
        }
        return (parsed.count, count)
    }

    static func parseDate(_ s: String) -> Date? {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = f.date(from: s) { return d }
        f.formatOptions = [.withInternetDateTime]
        return f.date(from: s)
    }

    /// Foundation's JSON errors say where: the line, when it can be found.
    static func lineOfJSONError(_ error: Error, in data: Data) -> Int? {
        let info = (error as NSError).userInfo
        guard let index = info["NSJSONSerializationErrorIndex"] as? Int else { return nil }
        return data.prefix(index).reduce(1) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
    }
}
