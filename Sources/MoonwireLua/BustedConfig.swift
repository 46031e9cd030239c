import CLua
import CLuaShim

/// busted's `.busted` file: a Lua file returning a table of tasks; the
/// `default` task (then `_all`) gives options the command line did not.
///
/// ```lua
/// return { default = { ROOT = { "spec" }, pattern = "_spec", tags = "fast", output = "json" } }
/// ```
///
/// Each option reads as a list of strings: a string is a list of one, a
/// table's array part is the list, `true` is `"true"`.
public struct BustedConfig: Sendable {
    /// The options `moonwire test` takes from the file.
    public static let keys = ["ROOT", "pattern", "lpath", "cpath", "helper", "tags", "exclude-tags", "output", "verbose"]

    public var values: [String: [String]] = [:]

    public init() {}

    /// Reads the file; a file that does not compile or run, or does not return
    /// a table, throws `file: reason`.
    public static func load(path: String) throws(LuaError) -> BustedConfig {
        let vm = LuaVM()
        let lua = vm.state
        try lua.load(file: path)
        try lua.call(arguments: 0, results: 1)
        guard lua.type(at: -1) == LUA_TTABLE else {
            throw .runtime("\(path) returns a \(lua.typeName(at: -1)), not a table of tasks (default = { ... })")
        }
        var config = BustedConfig()
        for task in ["_all", "default"] {
            lua.getField(task, table: -1)
            if lua.type(at: -1) == LUA_TTABLE {
                for key in keys {
                    lua.getField(key, table: -1)
                    if let list = strings(lua) { config.values[key] = list }
                    lua.pop()
                }
            }
            lua.pop()
        }
        return config
    }

    private static func strings(_ lua: LuaState) -> [String]? {
        switch lua.type(at: -1) {
        case LUA_TSTRING, LUA_TNUMBER: return lua.string(at: -1).map { [$0] }
        case LUA_TBOOLEAN: return [lua.boolean(at: -1) ? "true" : "false"]
        case LUA_TTABLE:
            var out: [String] = []
            var i: lua_Integer = 1
            while lua_rawgeti(lua.L, -1, i) != LUA_TNIL {
                if let s = lua.string(at: -1) { out.append(s) }
                lua.pop()
                i += 1
            }
            lua.pop()
            return out
        default: return nil
        }
    }

    /// Whether `name` matches any of the Lua `patterns` (string.find), as
    /// busted's `--pattern` picks test files; a bad pattern throws its error.
    public static func matches(_ name: String, patterns: [String]) throws(LuaError) -> Bool {
        let vm = LuaVM()
        let lua = vm.state
        for pattern in patterns {
            lua.getGlobal("string")
            lua.getField("find", table: -1)
            lua.push(name)
            lua.push(pattern)
            do throws(LuaError) {
                try lua.call(arguments: 2, results: 1)
            } catch {
                throw .runtime("bad --pattern '\(pattern)': \(error.description.split(separator: "\n").first.map(String.init) ?? "")")
            }
            let found = lua.type(at: -1) != LUA_TNIL
            lua.setTop(0)
            if found { return true }
        }
        return false
    }
}
