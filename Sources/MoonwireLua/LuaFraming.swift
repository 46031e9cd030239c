import MoonwireCore
import NIOCore

/// The framings as a script and the command line write them: the `framing` option of
/// `tcp://` and `tls://` connections and servers (docs/scripting.md) and the `--framing`
/// flag of `connect` and `listen`, one entry per framing. The option's parser, its line
/// in the docs table, the flag's parser and its help all come from this table.
///
/// Adding a framing touches two files: its own in Sources/MoonwireCore/Framing/ (a
/// ``FramingMode``: decoder, encoder, checks, name) and one entry here (how it is written).
/// A function given as `framing` reaches Swift as the prelude's marker `"custom"`.
public struct LuaFraming {
    /// How the script writes it, for the docs (`{ fixed = N }`).
    let syntax: String
    /// A string that selects it alone (`"line"`), and the framing it makes, given the
    /// largest message.
    var word: String? = nil
    var make: ((Int) -> TCPFraming)? = nil
    /// The key of a table that selects it (`fixed`), and the reader of that table (the
    /// table's `max`, if given, is passed in).
    var key: String? = nil
    var read: ((inout LuaOptionTable, Int?) throws(LuaArgumentError) -> TCPFraming)? = nil
    /// The `--framing` value (`length:N`) and its parser: nil when the text is not this framing.
    var flag: String? = nil
    var fromFlag: ((String, Int) -> TCPFraming?)? = nil

    static let all: [LuaFraming] = [
        LuaFraming(syntax: "`\"line\"`", word: "line", make: { .line(max: $0) }, flag: "line", fromFlag: { $0 == "line" ? .line(max: $1) : nil }),
        LuaFraming(syntax: "`\"raw\"`", word: "raw", make: { _ in .raw }, flag: "raw", fromFlag: { text, _ in text == "raw" ? .raw : nil }),
        LuaFraming(
            syntax: "`{ delimiter = S }`", key: "delimiter",
            read: { f, max throws(LuaArgumentError) in .delimiter(Array((try f.string("delimiter") ?? "").utf8), max: max ?? TCPFraming.defaultMax) },
            flag: "crlf", fromFlag: { $0 == "crlf" ? .delimiter([0x0d, 0x0a], max: $1) : nil }
        ),
        LuaFraming(syntax: "`{ fixed = N }`", key: "fixed", read: { f, _ throws(LuaArgumentError) in .fixed(try f.integer("fixed", min: 1) ?? 0) }),
        LuaFraming(
            syntax: "`{ length = 1\\|2\\|4\\|8, endian, adjust, max }`", key: "length",
            read: { f, max throws(LuaArgumentError) in
                var prefix = LengthPrefix(bytes: try f.integer("length", min: 1) ?? 0, max: max ?? TCPFraming.defaultMax)
                if let endian = try f.choice("endian", ["big", "little"]) { prefix.endian = LengthPrefix.Endian(rawValue: endian) ?? .big }
                prefix.adjust = try f.integer("adjust", min: Int.min) ?? 0
                return .length(prefix)
            },
            flag: "length:N",
            fromFlag: { text, max in
                guard text.hasPrefix("length:"), let bytes = Int(text.dropFirst(7)) else { return nil }
                return .length(LengthPrefix(bytes: bytes, endian: .big, max: max))
            }
        ),
    ]

    /// The docs' list: `"line"`, `"raw"`, `{ delimiter = S }`, ...
    static var syntax: String { all.map(\.syntax).joined(separator: ", ") }

    /// `line, raw, crlf or length:N`: what `--framing` takes.
    public static var flagSyntax: String {
        let flags = all.compactMap(\.flag)
        return flags.dropLast().joined(separator: ", ") + " or " + flags[flags.count - 1]
    }

    /// `custom` makes the decoder for a framing function; nil where none is allowed.
    static func parse(_ t: inout LuaOptionTable, custom: (() -> CustomFraming)?) throws(LuaArgumentError) -> TCPFraming? {
        let value = t.raw("framing")
        let words = all.compactMap(\.word).map { "\"\($0)\"" }.joined(separator: ", ")
        switch value {
        case .nil: return nil
        case .string(let bytes):
            let name = String(decoding: bytes, as: UTF8.self)
            if name == "custom" {
                guard let custom else { throw t.error("framing", "a framing function is for mw.connect only") }
                return .custom(custom())
            }
            guard let make = all.first(where: { $0.word == name })?.make else {
                throw t.error("framing", "\(words), a table or a function expected, got \"\(name)\"")
            }
            return make(TCPFraming.defaultMax)
        case .table(let table):
            var f = try LuaOptionTable(value, function: t.function, argument: t.argument, path: "\(t.path).framing")
            let max = try f.integer("max", min: 0)
            guard let read = all.first(where: { $0.key.map { table[.text($0)] != nil } ?? false })?.read else {
                let keys = all.compactMap(\.key)
                throw t.error("framing", "one of \(keys.dropLast().joined(separator: ", ")) or \(keys[keys.count - 1]) expected")
            }
            let framing = try read(&f, max)
            try f.finish()
            do {
                try framing.validate()
            } catch {
                throw t.error("framing", error.description)
            }
            return framing
        default:
            throw t.error("framing", "\(words), a table or a function expected, got \(value.typeName)")
        }
    }

    /// `--framing TEXT` of `connect` and `listen`, messages up to `max` bytes; the error
    /// says what the flag takes.
    public static func fromFlag(_ text: String, max: Int) throws(FlagError) -> TCPFraming {
        guard let framing = all.lazy.compactMap({ $0.fromFlag?(text.lowercased(), max) }).first else {
            throw FlagError("--framing '\(text)' is not a framing; use \(flagSyntax)")
        }
        do {
            try framing.validate()
        } catch {
            throw FlagError("--framing '\(text)': \(error); use \(flagSyntax)")
        }
        return framing
    }
}

/// A bad flag value, in the words `moonwire` prints.
public struct FlagError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
