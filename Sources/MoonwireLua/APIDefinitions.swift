/// moonwire's Lua API as editors and linters see it: the LuaLS definition files
/// (`---@meta`, resources/definitions/), which declare every function of `mw`, every
/// method of the objects it returns and the globals of a test file, and what is derived
/// from them by resources/definitions/api_tools.lua: the list of declared names (a test
/// holds it against the live bindings, both ways), the luacheck std `moonwire init`
/// writes, and `moonwire check`'s look for names that do not exist.
///
/// ```swift
/// APIDefinitions.files.map(\.name)                 // ["moonwire.lua", "busted.lua"]
/// APIDefinitions.check(source: Array("c = mw.connect(u)\nc:sendd(1)\n".utf8), chunk: "bot.lua")
/// // ["bot.lua:2: unknown method c:sendd: a connection has no method 'sendd' (did you mean c:send?)"]
/// ```
public enum APIDefinitions {
    /// The definition files, by the names `moonwire init` writes them under.
    public static let files: [(name: String, source: [UInt8])] = [
        ("moonwire.lua", moonwire),
        ("busted.lua", PackageResources.busted_meta_lua),
    ]

    /// resources/definitions/moonwire_meta.lua with the options' classes, which are made
    /// from their declarations (``OptionDeclarations/luaClasses()``), where its
    /// `-- @options:` comment stands.
    static let moonwire: [UInt8] = {
        let source = String(decoding: PackageResources.moonwire_meta_lua, as: UTF8.self)
        var lines = source.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let at = lines.firstIndex(where: { $0.hasPrefix("-- @options:") }) else {
            preconditionFailure("moonwire_meta.lua has no '-- @options:' line")
        }
        var end = at + 1
        while end < lines.count, lines[end].hasPrefix("-- ") { end += 1 }
        lines.replaceSubrange(at..<end, with: [OptionDeclarations.luaClasses()])
        return Array(lines.joined(separator: "\n").utf8)
    }()

    /// Every declared name, one a line: `mw.connect`, `mw.Connection:send`, `test:describe`.
    public static func names() -> String {
        call("names", [])
    }

    /// How many parameters each declared function takes, one a line: `mw.connect 2`,
    /// `mw.Connection:send 3` (`self` counts), `mw.spawn 1+` (and more).
    public static func parameters() -> String {
        call("params", [])
    }

    /// The `.luacheckrc` for a moonwire project: `mw` and the test globals as luacheck stds.
    public static func luacheckrc() -> String {
        call("luacheckrc", [])
    }

    /// The calls to `mw.*` names and methods of moonwire objects in `source` that do not
    /// exist, each as `chunk:line: message`.
    public static func check(source: [UInt8], chunk: String) -> [String] {
        call("check", [source, Array(chunk.utf8)]).split(separator: "\n").map(String.init)
    }

    /// Calls `api_tools.lua`'s `function` in a state of its own.
    private static func call(_ function: String, _ arguments: [[UInt8]]) -> String {
        let vm = LuaVM()
        let lua = vm.state
        return withExtendedLifetime(vm) {
            do {
                try lua.load(source: PackageResources.api_tools_lua, chunkName: "@moonwire/api_tools.lua")
                lua.push(moonwire)
                lua.push(PackageResources.busted_meta_lua)
                try lua.call(arguments: 2, results: 1)
                lua.getField(function, table: -1)
                for argument in arguments { lua.push(argument) }
                try lua.call(arguments: Int32(arguments.count), results: 1)
                return lua.string(at: -1) ?? ""
            } catch {
                fatalError("moonwire: the built-in api_tools.lua failed: \(error)")
            }
        }
    }
}
