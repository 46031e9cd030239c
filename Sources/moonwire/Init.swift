import ArgumentParser
import Foundation
import MoonwireLua

/// `moonwire init [DIR]`: a starter project an editor understands.
struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a starter bot and test, with editor completion and lint settings.",
        discussion: """
            Writes bot.lua (a bot that runs as it is), greeting.lua (a module it and its \
            test require), spec/greeting_spec.lua (run it with moonwire test), the LuaLS \
            definitions of moonwire's API in .moonwire/library/, a .luarc.json that points \
            lua-language-server at them, and a .luacheckrc with luacheck stds for mw and \
            the test globals. Files that exist are left alone unless --force.
            """
    )

    /// Where the definitions go, inside the project.
    static let library = ".moonwire/library"

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Overwrite files that exist (to update the definitions after upgrading moonwire).")
    var force = false

    @Argument(help: "The project's folder (made if missing; default: the current folder).")
    var directory = "."

    /// Every file, by its path in the project.
    static var files: [(path: String, contents: [UInt8])] {
        [
            ("bot.lua", PackageResources.bot_lua),
            ("greeting.lua", PackageResources.greeting_lua),
            ("spec/greeting_spec.lua", PackageResources.greeting_spec_lua),
            (".luarc.json", Array(luarc.utf8)),
            (".luacheckrc", Array(APIDefinitions.luacheckrc().utf8)),
        ] + APIDefinitions.files.map { ("\(library)/\($0.name)", $0.source) }
    }

    /// lua-language-server's settings: Lua 5.4, and moonwire's definitions as a library.
    static let luarc = """
        {
          "$schema": "https://raw.githubusercontent.com/LuaLS/vscode-lua/master/setting/schema.json",
          "runtime.version": "Lua 5.4",
          "workspace.library": ["\(library)"],
          "workspace.checkThirdParty": false
        }

        """

    func run() throws {
        let manager = FileManager.default
        let root = URL(fileURLWithPath: directory)
        for file in Self.files {
            let url = root.appendingPathComponent(file.path)
            if manager.fileExists(atPath: url.path) && !force {
                print("kept \(url.relativePath) (it exists; --force overwrites)")
                continue
            }
            do {
                try manager.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(file.contents).write(to: url)
            } catch {
                global.reportError("moonwire init: cannot write \(url.relativePath): \(error.localizedDescription)")
                throw ExitCode(1)
            }
            print("wrote \(url.relativePath)")
        }
    }
}

/// `moonwire defs`: the declared API's names, for the test that holds them against
/// the bindings. Not for users: hidden.
struct Defs: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the names the API definitions declare (or their parameter counts), one a line.",
        shouldDisplay: false
    )

    @Flag(help: "Print each declared function's parameter count instead (`mw.spawn 1+`).")
    var parameters = false

    @Flag(help: "Print the option tables of mw.connect and mw.listen and the fields of their table options (tls, heartbeat, reconnect, queue), as docs/scripting.md has them.")
    var options = false

    @Flag(help: "Print the connect and listen flags the options declare (`connect --max-message max_message`).")
    var optionFlags = false

    func run() throws {
        if options { return print(OptionDeclarations.markdownTables(), terminator: "") }
        if optionFlags { return print(OptionDeclarations.flagList(), terminator: "") }
        print(parameters ? APIDefinitions.parameters() : APIDefinitions.names(), terminator: "")
    }
}
