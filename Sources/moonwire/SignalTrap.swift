import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// SIGINT and SIGTERM for `run`, `connect`, `listen` and `lua`: the first one asks for a
/// shutdown; a second SIGINT exits at once with 130, after `beforeExit` (which puts the
/// terminal back). A SIGINT that `interrupting` takes (the REPL stopping the chunk it
/// runs) is neither.
final class SignalTrap {
    private let sources: [DispatchSourceSignal]

    init(onSignal: @escaping (Int32) -> Void, beforeExit: @escaping () -> Void = {}, interrupting: (() -> Bool)? = nil) {
        let queue = DispatchQueue(label: "moonwire.signals")
        var interrupts = 0
        sources = [SIGINT, SIGTERM].map { signo in
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            source.setEventHandler {
                if signo == SIGINT {
                    if interrupting?() == true { return }
                    interrupts += 1
                    if interrupts > 1 {
                        beforeExit()
                        fflush(stdout)
                        _exit(130)
                    }
                }
                onSignal(signo)
            }
            source.resume()
            return source
        }
    }

    func cancel() {
        sources.forEach { $0.cancel() }
    }
}
