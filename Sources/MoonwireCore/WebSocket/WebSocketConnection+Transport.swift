import NIOCore

/// A WebSocket connection is a ``Transport``: the events go to a ``TransportDelegate``
/// through the WebSocket delegate it also is.
extension WebSocketConnection: Transport {
    public var transportURL: TransportURL { .webSocket(self.url) }

    public var transportDelegate: TransportDelegate? {
        get { self.delegate as? TransportDelegate }
        set { self.delegate = newValue }
    }

    public var supportsPing: Bool { true }

    public func dial(_ url: TransportURL?) throws(WebSocketUsageError) {
        switch url {
        case nil: try self.connect()
        case .webSocket(let url)?: try self.connect(to: url)
        case .tcp(let url)?: throw WebSocketUsageError("a WebSocket connection cannot dial \(url)")
        }
    }
}
