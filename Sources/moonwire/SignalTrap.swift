import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// SIGINT and SIGTERM for `run`: the first one asks the script to shut down;
/// a second SIGINT exits at once with 130.
final class SignalTrap {
    private let sources: [DispatchSourceSignal]

    init(onSignal: @escaping (Int32) -> Void) {
        let queue = DispatchQueue(label: "moonwire.signals")
        var interrupts = 0
        sources = [SIGINT, SIGTERM].map { signo in
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            source.setEventHandler {
                if signo == SIGINT {
                    interrupts += 1
                    if interrupts > 1 {
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
