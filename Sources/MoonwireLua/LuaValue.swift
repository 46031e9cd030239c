import CLua
import CLuaShim

/// A Lua value copied into Swift: nil, booleans, integers, floats, byte strings
/// (NULs and invalid UTF-8 kept) and tables.
///
/// ```swift
/// lua.push(LuaValue.table([.text("op"): .text("login"), .integer(1): .boolean(true)]))
/// let v = try lua.value(at: -1)
/// ```
public enum LuaValue: Hashable, Sendable {
    case `nil`
    case boolean(Bool)
    case integer(Int64)
    case number(Double)
    case string([UInt8])
    case table([LuaValue: LuaValue])

    public static func text(_ s: String) -> LuaValue { .string(Array(s.utf8)) }
}

/// Why a Lua value could not be copied into Swift.
public struct LuaConversionError: Error, CustomStringConvertible, Equatable {
    public let description: String
    /// The type of the value that cannot be copied (`function`), if that was the reason.
    public var typeName: String? = nil
    /// Where it sits in the table being copied: `["heartbeat", "kind"]`, `["rules", "[2]"]`.
    public var keys: [String] = []

    /// `heartbeat.kind`, `rules[2]`: ``keys`` as a script writes them.
    public var path: String {
        keys.enumerated().map { $0.offset > 0 && !$0.element.hasPrefix("[") ? "." + $0.element : $0.element }.joined()
    }
}

extension LuaState {
    /// Tables nested deeper than this are refused (this also catches cycles).
    static let maxTableDepth = 64

    public func push(_ value: LuaValue) {
        switch value {
        case .nil: pushNil()
        case .boolean(let b): push(b)
        case .integer(let i): lua_pushinteger(L, lua_Integer(i))
        case .number(let d): push(d)
        case .string(let bytes): push(bytes)
        case .table(let entries):
            _ = ensureStack(3)
            lua_createtable(L, 0, Int32(min(entries.count, Int(Int32.max))))
            for (key, element) in entries where key != .nil {
                if case .number(let d) = key, d.isNaN { continue }
                push(key)
                push(element)
                lua_rawset(L, -3)
            }
        }
    }

    /// Pushes a handshake's headers (`request.headers` of `on_connect`, `info.headers` of
    /// `on_open`) as a table of lower-case names to values; of a repeated name the last
    /// wins. Written straight into the table: a Swift dictionary of them first cost a
    /// server a few µs per connecting peer.
    func pushHeaders<Headers: Sequence>(_ headers: Headers) where Headers.Element == (name: String, value: String) {
        _ = ensureStack(3)
        lua_createtable(L, 0, Int32(clamping: headers.underestimatedCount))
        for (name, value) in headers {
            var name = name
            name.withUTF8 { bytes in
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: bytes.count) { lower in
                    // Header names are tokens (ASCII): lower-casing their letters is lowercased().
                    for (i, byte) in bytes.enumerated() {
                        lower[i] = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
                    }
                    push(bytes: UnsafeRawBufferPointer(lower))
                }
            }
            push(value)
            lua_rawset(L, -3)
        }
    }

    /// Pushes the table a handshake's handler gets, the same for both roles: `on_open`'s
    /// `info` (a connection) and `on_connect`'s `request` (a peer) have `headers` and,
    /// when one was agreed, `protocol`; `own` are the role's own fields, by name.
    func pushHandshake<Headers: Sequence>(headers: Headers, subprotocol: String?, own: KeyValuePairs<String, LuaValue>)
    where Headers.Element == (name: String, value: String) {
        newTable(fields: Int32(2 + own.count))
        pushHeaders(headers)
        setField("headers", table: -2)
        if let subprotocol {
            push(subprotocol)
            setField("protocol", table: -2)
        }
        for (name, value) in own {
            push(value)
            setField(name, table: -2)
        }
    }

    /// Copies the value at `index`; functions, userdata, threads and over-deep tables throw.
    public func value(at index: Int32) throws(LuaConversionError) -> LuaValue {
        try value(at: lua_absindex(L, index), depth: 0)
    }

    private func value(at index: Int32, depth: Int) throws(LuaConversionError) -> LuaValue {
        switch lua_type(L, index) {
        case LUA_TNIL, LUA_TNONE: return .nil
        case LUA_TBOOLEAN: return .boolean(boolean(at: index))
        case LUA_TNUMBER:
            if lua_isinteger(L, index) != 0 { return .integer(Int64(lua_tointegerx(L, index, nil))) }
            return .number(mw_tonumber(L, index, nil))
        case LUA_TSTRING: return .string(bytes(at: index) ?? [])
        case LUA_TTABLE:
            guard depth < Self.maxTableDepth, ensureStack(3) else {
                throw LuaConversionError(description: "table nested too deep (or containing itself)")
            }
            var entries: [LuaValue: LuaValue] = [:]
            lua_pushnil(L)
            // lua_next only raises for a key that is not in the table; the keys
            // here come from lua_next itself and are never converted in place.
            while lua_next(L, index) != 0 {
                let key: LuaValue
                let element: LuaValue
                do {
                    key = try value(at: lua_absindex(L, -2), depth: depth + 1)
                } catch {
                    pop(2)
                    throw error
                }
                do {
                    element = try value(at: lua_absindex(L, -1), depth: depth + 1)
                } catch {
                    pop(2)
                    var located = error
                    switch key {
                    case .string(let name): located.keys.insert(String(decoding: name, as: UTF8.self), at: 0)
                    case .integer(let i): located.keys.insert("[\(i)]", at: 0)
                    default: break
                    }
                    throw located
                }
                entries[key] = element
                pop()
            }
            return .table(entries)
        default:
            let type = typeName(at: index)
            throw LuaConversionError(description: "cannot copy a \(type) value", typeName: type)
        }
    }
}
