import Foundation
import MoonwireCore
import MoonwireLua

/// Turns what happens in a `connect` or `listen` session into lines on the console.
///
/// For people (at a terminal): `> sent` and `< received` markers, colours, hexdumps of
/// binary messages, events on stderr. For pipes: one received message per line, nothing
/// else on stdout. With `--jsonl`: every event as one JSON object on stdout.
final class SessionPrinter: @unchecked Sendable {
    enum Direction: String {
        case incoming = "in", outgoing = "out", local
    }

    let console: Console
    private let options: SessionOptions
    private let colors: Bool
    /// TCP messages carry no kind: ones that look like text are shown as text.
    private let kindless: Bool
    /// `--proto`, `--msgpack`, `--cbor`: binary messages shown decoded.
    var codec: ConsoleCodec?

    init(console: Console, options: SessionOptions, kindless: Bool) {
        self.console = console
        self.options = options
        self.colors = options.colors
        self.kindless = kindless
    }

    /// A message sent or received; `peer` names the peer of a `listen` session (`1`, `all`).
    /// `kind` names a decoded packet for `--jsonl` (`connect --protocol`: "publish", "event").
    func message(_ bytes: [UInt8], binary: Bool, direction: Direction, peer: String? = nil, kind: String? = nil) {
        // A text frame stays text: only binary messages (and TCP's, which carry no kind) are decoded.
        let decoded = binary ? codec.map { $0.text(of: bytes) } : nil
        let binary = binary && !(kindless && decoded == nil && MessageText.looksLikeText(bytes))
        if options.jsonl {
            var fields = [("kind", LogLine.jsonString(kind ?? (binary ? "binary" : "text"))), ("data", jsonData(bytes, binary: binary))]
            if binary { fields.append(("encoding", LogLine.jsonString(options.binaryAs.rawValue))) }
            switch decoded {
            case .success(let text): fields.append(("decoded", LogLine.jsonString(text)))
            case .failure(let error): fields.append(("decode_error", LogLine.jsonString(error.description)))
            case nil: break
            }
            return jsonLine(direction: direction, peer: peer, fields)
        }
        if !console.interactive {
            // Pipes get what came in, one message a line; what was sent is not repeated.
            guard direction == .incoming else { return }
            let line = stamp() + (peer.map { "[\($0)] " } ?? "")
            let body: [UInt8]
            if let decoded {
                switch decoded {
                case .success(let text): body = Array(text.utf8)
                case .failure(let error): body = Array("\(error): \(BinaryText.hex(bytes))".utf8)
                }
            } else if binary {
                switch options.binaryAs {
                case .hex: body = Array(BinaryText.hex(bytes).utf8)
                case .base64: body = Array(BinaryText.base64(bytes).utf8)
                case .text: body = bytes
                }
            } else if options.json, let pretty = MessageText.prettyJSON(bytes) {
                body = Array(pretty.utf8)
            } else {
                body = bytes
            }
            return console.write(Array(line.utf8) + body + [0x0a])
        }
        let marker = direction == .incoming ? "<" : ">"
        let head = stamp() + (peer.map { "[\($0)] " } ?? "") + paint(marker, direction == .incoming ? "36" : "32") + " "
        var lines: [String]
        if let decoded {
            switch decoded {
            case .success(let text): lines = [text]
            case .failure(let error): lines = [paint(error.description, "31")] + MessageText.hexdump(bytes).map { "  " + $0 }
            }
        } else if binary {
            switch options.binaryAs {
            case .hex: lines = ["binary, \(bytes.count) bytes"] + MessageText.hexdump(bytes).map { "  " + $0 }
            case .base64: lines = ["binary: " + BinaryText.base64(bytes)]
            case .text: lines = [TerminalText.printable(String(decoding: bytes, as: UTF8.self))]
            }
        } else if options.json, let pretty = MessageText.prettyJSON(bytes) {
            lines = [pretty]
        } else {
            lines = [TerminalText.printable(String(decoding: bytes, as: UTF8.self))]
        }
        console.write(head + lines.joined(separator: "\n") + "\n")
    }

    /// Something else that happened: `kind` names it for `--jsonl` (open, close, pong,
    /// error, reconnect, connect, listen), `text` says it for people, on stderr.
    /// `fields` are extra JSON members, their values already JSON.
    func event(_ kind: String, _ text: String, direction: Direction = .local, peer: String? = nil, isError: Bool = false, fields: [(String, String)] = []) {
        if options.jsonl {
            return jsonLine(direction: direction, peer: peer, [("kind", LogLine.jsonString(kind)), ("data", LogLine.jsonString(text))] + fields)
        }
        let label = peer.map { "[\($0)] " } ?? ""
        if console.interactive {
            console.write(stamp() + label + paint(text, isError ? "31" : "2") + "\n", to: .err)
        } else {
            console.write(stamp() + "moonwire: " + label + text + "\n", to: .err)
        }
    }

    /// A usage problem at the prompt (bad hex, unknown command): the session goes on.
    func complaint(_ text: String) {
        event("error", text, isError: true)
    }

    /// A prompt command the session has no case of its own for: `/help` (or `/?`) shows
    /// `help`, anything else is unknown. The same for `connect` and `listen`.
    func otherCommand(_ name: String, help: String) {
        if name == "help" || name == "?" {
            event("help", help)
        } else {
            complaint("unknown command /\(name); /help lists them, // sends a line starting with /")
        }
    }

    /// `--jsonl`: `{"time":…,"direction":…,"peer":…,"kind":…,"data":…}`.
    private func jsonLine(direction: Direction, peer: String?, _ fields: [(String, String)]) {
        var members = [
            ("time", LogLine.jsonString(LogLine.timestamp(LogLine.now(), utc: true))),
            ("direction", LogLine.jsonString(direction.rawValue)),
        ]
        if let peer { members.append(("peer", Int(peer).map(String.init) ?? LogLine.jsonString(peer))) }
        members += fields
        console.write("{" + members.map { LogLine.jsonString($0.0) + ":" + $0.1 }.joined(separator: ",") + "}\n")
    }

    private func jsonData(_ bytes: [UInt8], binary: Bool) -> String {
        guard binary else { return LogLine.jsonString(String(decoding: bytes, as: UTF8.self)) }
        switch options.binaryAs {
        case .hex: return LogLine.jsonString(BinaryText.hex(bytes))
        case .base64: return LogLine.jsonString(BinaryText.base64(bytes))
        case .text: return LogLine.jsonString(String(decoding: bytes, as: UTF8.self))
        }
    }

    private func stamp() -> String {
        options.timestamps ? LogLine.timestamp(LogLine.now(), utc: false) + " " : ""
    }

    private func paint(_ text: String, _ code: String) -> String {
        colors ? "\u{1b}[\(code)m\(text)\u{1b}[0m" : text
    }
}
