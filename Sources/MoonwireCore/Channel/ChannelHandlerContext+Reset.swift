import NIOCore

extension ChannelHandlerContext {
    /// Closes the channel; with `reset`, the kernel sends RST instead of FIN
    /// (SO_LINGER 0), as a crashed peer or a middlebox would.
    func close(reset: Bool) {
        guard reset, let socket = self.channel as? SocketOptionProvider else {
            self.close(promise: nil)
            return
        }
        socket.setSoLinger(NIOLinger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
            self.close(promise: nil)
        }
    }
}
