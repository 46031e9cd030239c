#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// A server's accepting stopped for want of resources, or started again: what
/// ``MessageServerDelegate/server(_:accepting:)`` reports, once each per episode.
///
/// ```swift
/// func server(_ s: MessageServer, accepting event: AcceptPause) {
///     logger.warning("server \(s.url): \(event)")
///     // server ws://127.0.0.1:9000/: cannot accept connections: too many open files
///     // (this process may have 64, see ulimit -n); not accepting for now, retrying
///     // after 20 ms, then up to every 1 s
/// }
/// ```
public enum AcceptPause: Sendable, Hashable, CustomStringConvertible {
    /// `accept` failed with `errno` (EMFILE, ENFILE, ENOBUFS, ENOMEM): the server stopped
    /// accepting and retries by itself, after ``AcceptBackoff/first`` and then twice as
    /// long each time, up to ``AcceptBackoff/longest``.
    case paused(errno: Int32)
    /// A connection was accepted again, `after` the first failure and `retries` retries.
    case resumed(after: TimeAmount, retries: Int)

    public var description: String {
        switch self {
        case .paused(let code):
            let reason = DescriptorLimit.explain(errno: code)
            return "cannot accept connections: \(reason); not accepting for now, retrying after "
                + "\(AcceptBackoff.describe(AcceptBackoff.first)), then up to every \(AcceptBackoff.describe(AcceptBackoff.longest))"
        case .resumed(let after, let retries):
            return "accepting connections again, after \(AcceptBackoff.describe(after)) and \(retries) \(retries == 1 ? "retry" : "retries")"
        }
    }
}

/// Keeps a listening socket from spinning when `accept` cannot get a descriptor.
///
/// Out of descriptors, a pending connection stays in the kernel's queue, so the socket
/// stays readable and NIO, which keeps accepting after such an error, calls `accept`
/// again at once, for ever, at full CPU. This handler, first in the server channel's
/// pipeline, sees the error (NIO fires it there and does not close the channel), turns
/// `autoRead` off, and turns it back on after a pause: 20 ms, then twice as long each
/// time accepting fails again, up to 1 s. The first accepted connection ends the
/// episode. The delegate hears of the pause and of the end once each.
final class AcceptBackoff: ChannelInboundHandler {
    typealias InboundIn = Channel
    typealias InboundOut = Channel

    /// The first pause and the longest.
    static let first = TimeAmount.milliseconds(20)
    static let longest = TimeAmount.seconds(1)

    private let report: (AcceptPause) -> Void
    private var episode: (started: NIODeadline, pause: TimeAmount, retries: Int)?
    private var retry: Scheduled<Void>?

    init(report: @escaping (AcceptPause) -> Void) {
        self.report = report
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let episode = self.episode {
            self.episode = nil
            self.report(.resumed(after: .now() - episode.started, retries: episode.retries))
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard let code = Self.shortage(error) else { return context.fireErrorCaught(error) }
        let pause: TimeAmount
        if var episode = self.episode {
            pause = min(episode.pause * 2, Self.longest)
            episode.pause = pause
            episode.retries += 1
            self.episode = episode
        } else {
            pause = Self.first
            self.episode = (.now(), pause, 0)
            self.report(.paused(errno: code))
        }
        self.setAutoRead(context.channel, false)
        self.retry?.cancel()
        self.retry = context.eventLoop.assumeIsolated().scheduleTask(in: pause) { [weak self] in
            self?.retry = nil
            self?.setAutoRead(context.channel, true)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.retry?.cancel()
        self.retry = nil
    }

    private func setAutoRead(_ channel: Channel, _ on: Bool) {
        try? channel.syncOptions?.setOption(.autoRead, value: on)
    }

    /// The errno of an accept that failed for want of descriptors or memory (what NIO
    /// leaves the listening socket open after); nil for any other error.
    static func shortage(_ error: Error) -> Int32? {
        guard let error = error as? IOError else { return nil }
        switch error.errnoCode {
        case EMFILE, ENFILE, ENOBUFS, ENOMEM: return error.errnoCode
        default: return nil
        }
    }

    /// "20 ms", "1 s", "2.4 s".
    static func describe(_ amount: TimeAmount) -> String {
        let ms = amount.nanoseconds / 1_000_000
        if ms < 1000 { return "\(ms) ms" }
        if ms % 1000 == 0 { return "\(ms / 1000) s" }
        return "\(ms / 1000).\(ms % 1000 / 100) s"
    }
}
