import ArgumentParser
import Foundation
import Logging
import MoonwireCore
import MoonwireLua
import NIOCore
import NIOPosix

/// `moonwire lua`: lua5.4's command line, with `mw` loaded and the event loop running.
struct LuaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lua",
        abstract: "A Lua 5.4 interpreter and REPL with mw loaded, taking lua5.4's options.",
        discussion: """
            moonwire lua [options] [script [args]]: -e stat runs stat, -l mod requires mod \
            into the global mod (-l g=mod into g), -i enters the REPL after the script, -v \
            prints the version, -E ignores LUA_INIT, LUA_PATH and LUA_CPATH, -W turns \
            warnings on, -- stops handling options, - runs stdin. With nothing to run, the \
            REPL starts at a terminal and stdin runs otherwise. At the prompt, =expr and a \
            bare expression print their values through mw.inspect, an incomplete chunk \
            asks for more with >>, and connections and timers run while you type \
            (print from a handler shows above the prompt). A script keeps running while a \
            connection, server or timer is alive, as with moonwire run; nothing limits how \
            long Lua code computes unless mw.limits asks. More in docs/cli.md.
            """
    )

    @Argument(parsing: .captureForPassthrough, help: "lua5.4's options, then the script and its arguments.")
    var arguments: [String] = []

    /// lua.c's usage text, for an option it does not know.
    static func usage(_ bad: String) -> String {
        let problem = bad.count >= 2 && "el".contains(bad[bad.index(after: bad.startIndex)])
            ? "'\(bad)' needs argument" : "unrecognized option '\(bad)'"
        return """
            moonwire lua: \(problem)
            usage: moonwire lua [options] [script [args]]
            Available options are:
              -e stat   execute string 'stat'
              -i        enter interactive mode after executing 'script'
              -l mod    require library 'mod' into global 'mod'
              -l g=mod  require library 'mod' into global 'g'
              -v        show version information
              -E        ignore environment variables
              -W        turn warnings on
              --        stop handling options
              -         stop handling options and execute stdin

            """
    }

    /// The plan lua.c's collectargs makes of a command line, and whether to print
    /// the version; the offending option when there is one.
    static func plan(_ arguments: [String], stdinIsTerminal: Bool) -> Result<(LuaInterpreter.Plan, version: Bool), UsageError> {
        var plan = LuaInterpreter.Plan()
        plan.argv = [ScriptRuntime.interpreter] + arguments
        var version = false, executes = false
        var i = 0
        options: while i < arguments.count {
            let a = arguments[i]
            guard a.hasPrefix("-") else {
                plan.script = i + 1
                break
            }
            switch a {
            case "--":
                if i + 1 < arguments.count { plan.script = i + 2 }
                break options
            case "-":
                plan.script = i + 1
                plan.scriptFromStdin = true
                break options
            case "-E": plan.ignoreEnvironment = true
            case "-W": plan.steps.append(.warnings)
            case "-i": plan.interactive = true; version = true
            case "-v": version = true
            default:
                guard a.hasPrefix("-e") || a.hasPrefix("-l") else { return .failure(UsageError(option: a)) }
                var value = String(a.dropFirst(2))
                if value.isEmpty {
                    i += 1
                    guard i < arguments.count, !arguments[i].hasPrefix("-") else { return .failure(UsageError(option: a)) }
                    value = arguments[i]
                }
                if a.hasPrefix("-e") {
                    executes = true
                    plan.steps.append(.execute(value))
                } else {
                    plan.steps.append(.require(value))
                }
            }
            i += 1
        }
        if plan.script == nil, !plan.interactive, !executes, !version {
            // Nothing to do: the REPL at a terminal, else stdin is the script.
            if stdinIsTerminal {
                plan.interactive = true
                version = true
            } else {
                plan.scriptFromStdin = true
            }
        }
        return .success((plan, version))
    }

    struct UsageError: Error {
        var option: String
    }

    func run() throws {
        // lua has no -h, --help or --version: these are moonwire's, as for every other command.
        if arguments.first == "--help" || arguments.first == "-h" { throw CleanExit.helpRequest(self) }
        if arguments.first == "--version" { throw CleanExit.message(ScriptRuntime.version) }
        let (plan, version): (LuaInterpreter.Plan, Bool)
        switch Self.plan(arguments, stdinIsTerminal: isatty(0) == 1) {
        case .success(let made): (plan, version) = made
        case .failure(let bad):
            FileHandle.standardError.write(Data(Self.usage(bad.option).utf8))
            throw ExitCode(1)
        }
        if version { print(LuaInterpreter.copyright) }
        fflush(stdout)
        let logger = Logger(label: "moonwire") { _ in MoonwireLogHandler(level: .info, format: .text) }
        let group = try LoopGroup.make(threads: 1)
        let loop = group.next()
        // At the REPL, output goes through the console so that lines arriving while
        // the user types never tear the line being edited.
        let console = plan.interactive ? Console(interactive: Console.isTerminal, prompt: "> ", colors: false, mode: .asking) : nil
        let io: LuaInterpreter.IO
        if let console {
            io = .init(
                writeLine: { line in console.write(Array(line) + [0x0A]) },
                writeError: { console.write($0, to: .err) },
                ask: { console.ask($0) }
            )
        } else {
            io = .init(
                writeLine: nil,
                writeError: { text in
                    fflush(stdout)
                    FileHandle.standardError.write(Data(text.utf8))
                },
                ask: { _ in }
            )
        }
        let interpreter = LuaInterpreter(eventLoop: loop, plan: plan, logger: logger, io: io)
        let signals = SignalTrap(
            onSignal: { interpreter.shutdown(signal: $0) }, beforeExit: { console?.restoreTerminalNow() },
            interrupting: { interpreter.interrupt() })
        console?.start(on: loop, onLine: { interpreter.enter($0) }, onEnd: { interpreter.enter(nil) })
        let code: Int32
        do {
            code = try interpreter.run().wait()
        } catch {
            // The interpreter's own chunk does not compile: a fault of this build.
            ScriptRuntime.writeToStderr("moonwire lua: \(error)")
            code = 1
        }
        signals.cancel()
        console?.finish()
        ProcessEnd.exit(code, parking: [loop])
    }
}
