import ArgumentParser
import Dispatch
import MoonwireLua
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a bot or automation script.",
        discussion: """
            The script keeps running while anything is alive: an open or reconnecting \
            connection, a listening server, a pending timer or a waiting coroutine. \
            mw.exit(code) ends it at once. SIGINT and SIGTERM close everything and exit \
            130 and 143; a second SIGINT exits at once.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Log an uncaught error in a callback and go on, instead of exiting with 1.")
    var keepGoing = false

    @Argument(help: "The Lua script to run.")
    var script: String

    @Argument(parsing: .captureForPassthrough, help: "Arguments for the script: mw.args, and arg as in the lua program.")
    var arguments: [String] = []

    func run() throws {
        try ScriptFile.checkReadable(script)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let runtime = ScriptRuntime(
            eventLoop: group.next(),
            options: .init(keepGoing: keepGoing, logger: global.makeLogger(), reportError: global.reportError)
        )
        let signals = SignalTrap { runtime.shutdown(signal: $0) }
        let code: Int32
        do {
            code = try runtime.run(script: script, arguments: arguments).wait()
        } catch let error as ScriptRuntime.StartError {
            global.reportError(error.description)
            code = 1
        }
        signals.cancel()
        fflush(stdout)
        // The Lua state and the loop die with the process: tearing them down
        // would only run finalizers nobody waits for.
        Glibc.exit(code)
    }
}

enum ScriptFile {
    /// A missing or unreadable script is a usage error (exit 2), not a script error.
    static func checkReadable(_ path: String) throws {
        guard let file = fopen(path, "r") else {
            let reason = String(cString: strerror(errno))
            throw ValidationError("cannot read '\(path)': \(reason); give the path of a Lua script")
        }
        fclose(file)
    }
}
