import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// SIGINT and SIGTERM for `run`, `connect` and `listen`: the first one asks for a
/// shutdown; a second SIGINT exits at once with 130, after `beforeExit` (which puts the
/// terminal back).
final class SignalTrap {
    private let sources: [DispatchSourceSignal]

    init(onSignal: @escaping (Int32) -> Void, beforeExit: @escaping () -> Void = {}) {
        let queue = DispatchQueue(label: "moonwire.signals")
        var interrupts = 0
        sources = [SIGINT, SIGTERM].map { signo in
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            source.setEventHandler {
                if signo == SIGINT {
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
