import ArgumentParser
import Foundation
import MoonwireLua

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that scripts compile, without running them.",
        discussion: """
            Every file's errors are reported as file:line: message; the exit code is 1 if \
            any file has one. Besides syntax errors, it finds names of moonwire's API that \
            do not exist: an mw.* name (mw.conect) and a method of a connection, server, \
            peer, timer or metric (c:sendd) on a variable the file shows the type of \
            (local c = mw.connect(...), a handler's first argument).
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The Lua scripts to check.")
    var scripts: [String]

    func validate() throws {
        if scripts.isEmpty { throw ValidationError("no script given; name one or more .lua files") }
    }

    func run() throws {
        var failed = false
        let vm = LuaVM()
        for script in scripts {
            try ScriptFile.checkReadable(script)
            if let message = withExtendedLifetime(vm, { vm.state.compileError(file: script) }) {
                global.reportError(message)
                failed = true
                continue
            }
            guard let source = FileManager.default.contents(atPath: script) else { continue }
            for problem in APIDefinitions.check(source: Array(source), chunk: script) {
                global.reportError(problem)
                failed = true
            }
        }
        if failed { throw ExitCode(1) }
    }
}
