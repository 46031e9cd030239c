import ArgumentParser
import Foundation
import MoonwireCore
import NIOPosix

/// The event loops a command runs on. Each loop holds descriptors from its start (epoll,
/// an eventfd, a timerfd) and NIO traps when it cannot open them; so a process allowed
/// too few open files is told so in words, before any loop starts.
enum LoopGroup {
    /// Descriptors each loop needs at once: its own three, the busy poll's pipe and the
    /// script file its worker reads.
    static let perLoop = 6
    /// And the process besides: two signalfds (Ctrl-C), /dev/null and a first connection.
    static let besides = 4

    static func make(threads: Int, metricsDelegate: (any NIOEventLoopMetricsDelegate)? = nil) throws -> MultiThreadedEventLoopGroup {
        let needed = perLoop * threads + besides
        if let free = DescriptorLimit.available(upTo: needed), free < needed {
            let limit = DescriptorLimit.current.map { "ulimit -n is \($0)" } ?? "see ulimit -n"
            let loops = threads == 1 ? "its event loop" : "each of its \(threads) event loops"
            let message = "cannot start: \(free) more files can be open (\(limit)), and moonwire needs \(needed): "
                + "\(perLoop) for \(loops) (the loop, busy polling, the script) and \(besides) for signals and a first connection; "
                + "raise the limit (ulimit -n)\n"
            FileHandle.standardError.write(Data(message.utf8))
            throw ExitCode(1)
        }
        if let metricsDelegate {
            return MultiThreadedEventLoopGroup(numberOfThreads: threads, metricsDelegate: metricsDelegate)
        }
        return MultiThreadedEventLoopGroup(numberOfThreads: threads)
    }
}
