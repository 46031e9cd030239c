/// Why a server could not start listening: a bad address, a port in use, a TLS
/// certificate that does not load.
///
/// ```swift
/// do { _ = try MessageServer(url: url, eventLoop: loop) }
/// catch { print(error) }   // "listen: address already in use (127.0.0.1:9000)"
/// ```
public struct ServerListenError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public var message: String

    /// Creates an error.
    public init(_ message: String) { self.message = message }

    /// `listen: ` and the message.
    public var description: String { "listen: \(self.message)" }
}
