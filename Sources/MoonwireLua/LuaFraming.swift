import MoonwireCore
import NIOCore

/// The `framing` option of `tcp://` and `tls://` connections and servers
/// (docs/scripting.md): `"line"`, `"raw"`, `{ delimiter = S }`, `{ fixed = N }`,
/// `{ length = B, endian =, adjust =, max = }`, or a Lua function, which the
/// prelude has replaced by the marker `"custom"` and keeps itself.
enum LuaFraming {
    /// `custom` makes the decoder for a framing function; nil where none is allowed.
    static func parse(_ t: inout LuaOptionTable, custom: (() -> CustomFraming)?) throws(LuaArgumentError) -> TCPFraming? {
        let value = t.raw("framing")
        switch value {
        case .nil: return nil
        case .string(let bytes):
            switch String(decoding: bytes, as: UTF8.self) {
            case "line": return .line()
            case "raw": return .raw
            case "custom":
                guard let custom else { throw t.error("framing", "a framing function is for mw.connect only") }
                return .custom(custom())
            case let other: throw t.error("framing", "\"line\", \"raw\", a table or a function expected, got \"\(other)\"")
            }
        case .table:
            var f = try LuaOptionTable(value, function: t.function, argument: t.argument, path: "\(t.path).framing")
            let max = try f.integer("max", min: 0)
            let framing: TCPFraming
            if let delimiter = try f.string("delimiter") {
                framing = .delimiter(Array(delimiter.utf8), max: max ?? TCPFraming.defaultMax)
            } else if let size = try f.integer("fixed", min: 1) {
                framing = .fixed(size)
            } else if let bytes = try f.integer("length", min: 1) {
                var prefix = LengthPrefix(bytes: bytes, max: max ?? TCPFraming.defaultMax)
                if let endian = try f.string("endian") {
                    guard let e = LengthPrefix.Endian(rawValue: endian) else {
                        throw f.error("endian", "\"big\" or \"little\" expected, got \"\(endian)\"")
                    }
                    prefix.endian = e
                }
                prefix.adjust = try f.integer("adjust", min: Int.min) ?? 0
                framing = .length(prefix)
            } else {
                throw t.error("framing", "one of delimiter, fixed or length expected")
            }
            try f.finish()
            do {
                try framing.validate()
            } catch {
                throw t.error("framing", error.description)
            }
            return framing
        default:
            throw t.error("framing", "\"line\", \"raw\", a table or a function expected, got \(value.typeName)")
        }
    }
}
