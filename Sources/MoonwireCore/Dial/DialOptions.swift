import NIOCore

/// What every dial has, whatever the transport: how long it may take, how long the close
/// may take, TLS and the proxy. ``WebSocketClientOptions`` and ``TCPClientOptions`` each
/// hold one (`options.dial`) and read its fields as their own (`options.tls`), so the four
/// settings, their defaults and their documentation are written here only.
///
/// ```swift
/// var dial = DialOptions()
/// dial.connectTimeout = .seconds(3)
/// dial.proxy = .direct
/// let ws = WebSocketClientOptions(dial: dial)
/// let tcp = TCPClientOptions(framing: .line(), dial: dial)
/// ```
public struct DialOptions: Sendable {
    /// Time allowed for DNS, TCP, TLS and (WebSocket) the HTTP upgrade together.
    public var connectTimeout: TimeAmount
    /// After `close`: how long to wait for the peer's close frame after ours and for the
    /// server to end TCP (WebSocket), or for pending writes to drain (TCP), before the
    /// connection is dropped anyway.
    public var closeTimeout: TimeAmount
    /// TLS settings for `wss://` and `tls://`.
    public var tls: TLSOptions
    /// The proxy to dial through; by default the one the environment names.
    public var proxy: ProxyChoice

    /// The defaults of the scripting API: 10 s connect timeout, 5 s close timeout,
    /// system trust, the environment's proxy.
    public init(
        connectTimeout: TimeAmount = .seconds(10),
        closeTimeout: TimeAmount = .seconds(5),
        tls: TLSOptions = TLSOptions(),
        proxy: ProxyChoice = .environment
    ) {
        self.connectTimeout = connectTimeout
        self.closeTimeout = closeTimeout
        self.tls = tls
        self.proxy = proxy
    }
}

/// Options that carry a ``DialOptions`` (``WebSocketClientOptions``, ``TCPClientOptions``)
/// read and write its fields as their own: `options.tls` is `options.dial.tls`.
@dynamicMemberLookup
public protocol DialOptionsCarrier {
    /// Timeouts, TLS and proxy, as every dial has them.
    var dial: DialOptions { get set }
}

extension DialOptionsCarrier {
    /// The fields of ``DialOptions`` (`connectTimeout`, `closeTimeout`, `tls`, `proxy`).
    public subscript<Value>(dynamicMember path: WritableKeyPath<DialOptions, Value>) -> Value {
        get { dial[keyPath: path] }
        set { dial[keyPath: path] = newValue }
    }
}
