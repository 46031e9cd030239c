/// Where `require` looks first, before Lua's own `package.path` and `package.cpath`:
/// the folder of the script `moonwire run` runs, so a bot can `require` a module that
/// sits next to it from whatever folder it is started in, then the templates given with
/// `--lua-path` and `--lua-cpath`.
///
/// ```swift
/// let search = ModuleSearchPath(script: "bots/bot.lua", luaPath: "lib/?.lua")
/// search.path    // "lib/?.lua;bots/?.lua;bots/?/init.lua;"
/// search.cpath   // "bots/?.so;"
/// ```
public struct ModuleSearchPath: Sendable, Hashable {
    /// Templates put before `package.path`, each ending with `;`.
    public var path = ""
    /// Templates put before `package.cpath`, each ending with `;`.
    public var cpath = ""

    /// Nothing added: Lua's own search path.
    public init() {}

    /// The script's folder, after `luaPath` and `luaCPath` (`;`-separated templates as
    /// `package.path` takes them, such as `lib/?.lua;lib/?/init.lua`), which come first
    /// as busted's `--lpath` and `--cpath` do.
    public init(script: String?, luaPath: String = "", luaCPath: String = "") {
        var path = Self.terminated(luaPath)
        var cpath = Self.terminated(luaCPath)
        if let script {
            let folder = Self.folder(of: script)
            path += "\(folder)/?.lua;\(folder)/?/init.lua;"
            cpath += "\(folder)/?.so;"
        }
        self.path = path
        self.cpath = cpath
    }

    /// The folder part of a path, `.` for a bare file name.
    static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "" : String(path[..<slash])
    }

    private static func terminated(_ templates: String) -> String {
        let trimmed = templates.split(separator: ";", omittingEmptySubsequences: true)
        return trimmed.map { $0 + ";" }.joined()
    }
}
