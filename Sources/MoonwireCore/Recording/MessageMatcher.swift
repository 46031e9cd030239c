import Foundation

/// How a replay compares a message that came with the recorded one (docs/recording.md).
/// JSON messages are compared as values: the parts named in `ignore` are left out
/// (see ``IgnorePath``), and `loose` accepts a message that has at least the recorded
/// fields. With a ``BinaryFormat`` binary messages are compared as the values they
/// decode to, by the same rules. Anything else must be the same bytes.
public struct MessageMatcher: Sendable {
    public var ignore: [String]
    public var loose: Bool
    /// What binary messages are (`replay --msgpack`, `--cbor`, `--proto`); nil: bytes.
    public var binaryFormat: BinaryFormat?
    private let paths: [IgnorePath]

    /// A format binary messages decode from: `json` gives a message's value as JSON
    /// text, nil when it does not decode; `text` shows a message in a difference.
    public struct BinaryFormat: Sendable {
        public var json: @Sendable ([UInt8]) -> [UInt8]?
        public var text: @Sendable ([UInt8]) -> String

        public init(json: @escaping @Sendable ([UInt8]) -> [UInt8]?, text: @escaping @Sendable ([UInt8]) -> String) {
            self.json = json
            self.text = text
        }
    }

    /// `ignore` must be valid paths (``IgnorePath/init(_:)`` says why one is not); one
    /// that is not leaves nothing out.
    public init(ignore: [String] = [], loose: Bool = false) {
        self.ignore = ignore
        self.loose = loose
        self.paths = ignore.compactMap { try? IgnorePath($0) }
    }

    /// nil when `actual` matches `expected`, else the differences, one per line.
    public func difference(expected: RecordedMessage, actual: [UInt8], kind: MessageKind) -> String? {
        var shown: String { "expected \(self.shown(expected.data, kind: expected.kind))\n     got \(self.shown(actual, kind: kind))" }
        if kind != expected.kind {
            return "expected a \(expected.kind) message, got a \(kind) one\n" + shown
        }
        if expected.data == actual { return nil }
        var values = (expected.data, actual)
        if kind == .binary {
            guard let format = binaryFormat, let e = format.json(expected.data), let a = format.json(actual) else { return shown }
            values = (e, a)
        }
        if let e = try? JSONSerialization.jsonObject(with: Data(values.0), options: .fragmentsAllowed),
            let a = try? JSONSerialization.jsonObject(with: Data(values.1), options: .fragmentsAllowed) {
            var lines: [String] = []
            compare(e, a, path: [], shown: "$", into: &lines)
            return lines.isEmpty ? nil : lines.joined(separator: "\n")
        }
        return shown
    }

    /// A message as a difference shows it: binary decoded when there is a format, else
    /// as ``preview(_:)`` shows it.
    public func shown(_ bytes: [UInt8], kind: MessageKind) -> String {
        if kind == .binary, let format = binaryFormat { return format.text(bytes) }
        return Self.preview(bytes)
    }

    private func ignored(_ path: [IgnorePath.Step]) -> Bool {
        paths.contains { $0.matches(path) }
    }

    private func compare(_ e: Any, _ a: Any, path: [IgnorePath.Step], shown: String, into lines: inout [String]) {
        if let eo = e as? [String: Any], let ao = a as? [String: Any] {
            for key in eo.keys.sorted() where !ignored(path + [.key(key)]) {
                let where_ = "\(shown).\(key)"
                guard let av = ao[key] else {
                    lines.append("\(where_): expected \(Self.json(eo[key]!)), missing")
                    continue
                }
                compare(eo[key]!, av, path: path + [.key(key)], shown: where_, into: &lines)
            }
            if !loose {
                for key in ao.keys.sorted() where eo[key] == nil && !ignored(path + [.key(key)]) {
                    lines.append("\(shown).\(key): not expected, got \(Self.json(ao[key]!))")
                }
            }
            return
        }
        if let ea = e as? [Any], let aa = a as? [Any] {
            if ea.count != aa.count && !(loose && aa.count > ea.count) {
                lines.append("\(shown): expected \(ea.count) elements, got \(aa.count)")
            }
            for (i, (ev, av)) in zip(ea, aa).enumerated() where !ignored(path + [.index(i)]) {
                compare(ev, av, path: path + [.index(i)], shown: "\(shown)[\(i)]", into: &lines)
            }
            return
        }
        if !Self.same(e, a) {
            lines.append("\(shown): expected \(Self.json(e)), got \(Self.json(a))")
        }
    }

    static func same(_ a: Any, _ b: Any) -> Bool {
        if a is NSNull || b is NSNull { return a is NSNull && b is NSNull }
        if let x = a as? String, let y = b as? String { return x == y }
        if let x = a as? NSNumber, let y = b as? NSNumber {
            // JSON true and 1 are not the same value.
            return isBoolean(x) == isBoolean(y) && x == y
        }
        return false
    }

    static func isBoolean(_ n: NSNumber) -> Bool { String(cString: n.objCType) == "c" || String(cString: n.objCType) == "B" }

    static func json(_ value: Any) -> String {
        if let s = value as? String {
            var out = ""
            JSONLine.quote(s, into: &out)
            return out
        }
        if value is NSNull { return "null" }
        if let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]) {
            return String(decoding: data, as: UTF8.self)
        }
        return "\(value)"
    }

    /// A message as a diff shows it: text quoted, binary as base64.
    public static func preview(_ b: [UInt8]) -> String {
        if let s = String(validating: b, as: UTF8.self) { return json(s) }
        return "base64:" + BinaryText.base64(b)
    }
}
