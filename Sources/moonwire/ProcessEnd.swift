import Dispatch
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Ends the process while its event loops may still be busy (closing
/// connections after mw.exit, for instance). exit(3) runs the libraries' static
/// destructors, and a loop thread working under them can crash (an abort was
/// seen once after 1 000 connections' echo benchmark had printed its result).
/// So every loop is parked first, on a task that never returns; exit(3) still
/// flushes what scripts wrote. A loop stuck in blocking Lua code (io.read) is
/// not waited for beyond a second: it touches nothing exit tears down.
enum ProcessEnd {
    static func exit(_ code: Int32, parking loops: [EventLoop]) -> Never {
        let parked = DispatchSemaphore(value: 0)
        let never = DispatchSemaphore(value: 0)
        for loop in loops {
            loop.execute {
                parked.signal()
                never.wait()
            }
        }
        for _ in loops {
            if parked.wait(timeout: .now() + 1) == .timedOut { break }
        }
        fflush(stdout)
        Glibc.exit(code)
    }
}
