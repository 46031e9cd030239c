import MoonwireCore

/// Reads an options table (`opts` of `mw.connect`, `mw.listen`) copied into
/// Swift, with misuse raised in the script's terms:
/// `bad argument #2 to 'mw.connect' (opts.connect_timeout: number expected, got string)`.
///
/// Every key must be read or listed as known: `finish()` refuses the rest, so a
/// typo such as `conect_timeout` is an error instead of a silently ignored option.
struct LuaOptionTable {
    let function: String
    let argument: Int
    let path: String
    private let entries: [LuaValue: LuaValue]
    private var seen: Set<String> = []

    init(_ value: LuaValue, function: String, argument: Int, path: String = "opts") throws(LuaArgumentError) {
        self.function = function
        self.argument = argument
        self.path = path
        switch value {
        case .nil: entries = [:]
        case .table(let t): entries = t
        default: throw LuaArgumentError("bad argument #\(argument) to '\(function)' (\(path): table expected, got \(value.typeName))")
        }
    }

    func error(_ key: String, _ message: String) -> LuaArgumentError {
        LuaArgumentError("bad argument #\(argument) to '\(function)' (\(path).\(key): \(message))")
    }

    mutating func raw(_ key: String) -> LuaValue {
        seen.insert(key)
        return entries[.text(key)] ?? .nil
    }

    mutating func number(_ key: String) throws(LuaArgumentError) -> Double? {
        switch raw(key) {
        case .nil: return nil
        case .integer(let i): return Double(i)
        case .number(let d) where d.isFinite || d == .infinity: return d
        case let other: throw error(key, "number expected, got \(other.typeName)")
        }
    }

    mutating func seconds(_ key: String) throws(LuaArgumentError) -> Double? {
        guard let s = try number(key) else { return nil }
        guard s >= 0, s < 1e9 else { throw error(key, "seconds must be from 0 to 1e9") }
        return s
    }

    mutating func integer(_ key: String, min: Int = 0) throws(LuaArgumentError) -> Int? {
        switch raw(key) {
        case .nil: return nil
        case .integer(let i) where i >= min: return Int(i)
        case .number(let d) where d.rounded() == d && d >= Double(min) && d < 9e18: return Int(d)
        case let other: throw error(key, "integer of at least \(min) expected, got \(other.typeName)")
        }
    }

    /// A count: a whole number of at least 1 (a float that is one is taken).
    mutating func count(_ key: String) throws(LuaArgumentError) -> Int? {
        let value = raw(key)
        switch value {
        case .nil: return nil
        case .integer(let i) where i > 0: return Int(i)
        case .number(let d) where d >= 1 && d < 9e18 && d.rounded() == d: return Int(d)
        case .integer(let i): throw error(key, "a positive number expected, got \(i)")
        case .number(let d): throw error(key, "a positive number expected, got \(d)")
        default: throw error(key, "a positive number expected, got \(value.typeName)")
        }
    }

    mutating func boolean(_ key: String) throws(LuaArgumentError) -> Bool? {
        switch raw(key) {
        case .nil: return nil
        case .boolean(let b): return b
        case let other: throw error(key, "boolean expected, got \(other.typeName)")
        }
    }

    mutating func string(_ key: String) throws(LuaArgumentError) -> String? {
        switch raw(key) {
        case .nil: return nil
        case .string(let b): return String(decoding: b, as: UTF8.self)
        case let other: throw error(key, "string expected, got \(other.typeName)")
        }
    }

    /// A sequence of strings; a single string counts as a list of one.
    mutating func strings(_ key: String) throws(LuaArgumentError) -> [String]? {
        switch raw(key) {
        case .nil: return nil
        case .string(let b): return [String(decoding: b, as: UTF8.self)]
        case .table(let t):
            var out: [String] = []
            for i in 1...max(t.count, 1) {
                guard let v = t[.integer(Int64(i))] else { break }
                guard case .string(let b) = v else { throw error(key, "list of strings expected, item \(i) is a \(v.typeName)") }
                out.append(String(decoding: b, as: UTF8.self))
            }
            guard out.count == t.count else { throw error(key, "list of strings expected (a sequence, no other keys)") }
            return out
        case let other: throw error(key, "list of strings expected, got \(other.typeName)")
        }
    }

    /// A sequence of integers; a single integer counts as a list of one.
    mutating func integers(_ key: String) throws(LuaArgumentError) -> [Int]? {
        switch raw(key) {
        case .nil: return nil
        case .integer(let i): return [Int(i)]
        case .table(let t):
            var out: [Int] = []
            for i in 1...max(t.count, 1) {
                guard let v = t[.integer(Int64(i))] else { break }
                guard case .integer(let n) = v else { throw error(key, "list of integers expected, item \(i) is a \(v.typeName)") }
                out.append(Int(n))
            }
            guard out.count == t.count else { throw error(key, "list of integers expected (a sequence, no other keys)") }
            return out
        case let other: throw error(key, "list of integers expected, got \(other.typeName)")
        }
    }

    /// A table of string keys to string values (headers), sorted by key for a stable order.
    mutating func stringMap(_ key: String) throws(LuaArgumentError) -> [(String, String)]? {
        switch raw(key) {
        case .nil: return nil
        case .table(let t):
            var out: [(String, String)] = []
            for (k, v) in t {
                guard case .string(let kb) = k else { throw error(key, "keys must be strings") }
                let value: String
                switch v {
                case .string(let vb): value = String(decoding: vb, as: UTF8.self)
                case .integer(let i): value = String(i)
                default: throw error(key, "value of '\(String(decoding: kb, as: UTF8.self))' must be a string")
                }
                out.append((String(decoding: kb, as: UTF8.self), value))
            }
            return out.sorted { $0.0 < $1.0 }
        case let other: throw error(key, "table expected, got \(other.typeName)")
        }
    }

    /// A nested table, or `false` (returned as nil with `disabled` true).
    mutating func table(_ key: String) throws(LuaArgumentError) -> LuaOptionTable? {
        let v = raw(key)
        if case .nil = v { return nil }
        // A holder with no path (c:heartbeat(opts) wraps its argument) names the argument `opts`.
        return try LuaOptionTable(v, function: function, argument: argument, path: path.isEmpty ? "opts" : "\(path).\(key)")
    }

    /// Refuses keys nobody read.
    func finish() throws(LuaArgumentError) {
        for key in entries.keys {
            guard case .string(let b) = key else {
                throw LuaArgumentError("bad argument #\(argument) to '\(function)' (\(path): keys must be option names)")
            }
            let name = String(decoding: b, as: UTF8.self)
            if !seen.contains(name) {
                throw LuaArgumentError("bad argument #\(argument) to '\(function)' (unknown option '\(path).\(name)')")
            }
        }
    }
}

extension LuaValue {
    var typeName: String {
        switch self {
        case .nil: return "nil"
        case .boolean: return "boolean"
        case .integer, .number: return "number"
        case .string: return "string"
        case .table: return "table"
        }
    }
}
