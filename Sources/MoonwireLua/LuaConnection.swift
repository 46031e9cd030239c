import MoonwireCore
import NIOCore

/// A connection as Lua sees it: the userdata returned by `mw.connect`, whose
/// events go to the prelude's dispatchers (handlers, receive/request waiters).
///
/// While the connection is alive (open, or on its way to be) the runtime holds
/// it and the userdata, so a script that dropped its handle still gets events
/// and keeps running. While it is alive it also holds the runtime, and its
/// `ManagedConnection` holds it, both strongly: a message reaches Lua without a weak
/// load. The runtime cuts both links (``detach()``) when the connection has ended for
/// good and when the script ends: an event that arrives after that finds nothing and
/// is dropped, and a closed connection the script still holds keeps nothing alive.
final class LuaConnection: LuaSession, ManagedConnectionDelegate {
    static let className = "moonwire.connection"
    /// What a method's misuse says was expected.
    static let typeName = "connection"

    private(set) var runtime: ScriptRuntime?
    let connection: ManagedConnection
    /// A `framing` function's bridge, held by the connection's decoder; it holds this object.
    private let framer: LuaFramer
    let closeTimeout: TimeAmount

    init(runtime: ScriptRuntime, connection: ManagedConnection, framer: LuaFramer, closeTimeout: TimeAmount, codec: NativeCodec?) {
        self.runtime = runtime
        self.connection = connection
        self.framer = framer
        self.closeTimeout = closeTimeout
        super.init(session: connection, codec: codec)
        connection.delegate = self
        framer.connection = self
    }

    /// Makes the links again (``detach()`` cut them): `c:reconnect()` on a connection
    /// closed for good.
    func attach(to runtime: ScriptRuntime) {
        self.runtime = runtime
        connection.delegate = self
        framer.connection = self
    }

    /// Cuts the links between the runtime, this object and its connection.
    func detach() {
        connection.delegate = nil
        framer.connection = nil
        runtime = nil
    }

    func managedConnectionDidOpen(_ connection: ManagedConnection, info: ManagedConnection.OpenInfo) {
        guard let runtime else { return }
        runtime.metrics.opened(self, timing: info.timing)
        runtime.dispatch(.open, for: self) { lua in
            lua.pushHandshake(headers: info.headers, subprotocol: info.subprotocol, own: ["reconnects": .integer(Int64(info.reconnects))])
            return 1
        }
    }

    func managedConnection(_ connection: ManagedConnection, didReceive message: ByteBuffer, kind: MessageKind) {
        runtime?.dispatchMessage(message, kind: kind, for: self)
    }

    func managedConnection(_ connection: ManagedConnection, didFail error: ConnectionError) {
        guard let runtime else { return }
        runtime.metrics.failed(self)
        runtime.dispatch(.error, for: self) { lua in
            lua.push(error.description)
            return 1
        }
    }

    func managedConnection(_ connection: ManagedConnection, didClose report: ConnectionLifecycle.CloseReport) {
        guard let runtime else { return }
        runtime.metrics.closed(self, code: report.code, willReconnect: report.willReconnect)
        runtime.dispatch(.close, for: self) { lua in
            lua.push(Int(report.code))
            lua.push(report.reason)
            lua.push(LuaValue.table([
                .text("clean"): .boolean(report.clean),
                .text("by"): .text(report.by.rawValue),
                .text("will_reconnect"): .boolean(report.willReconnect),
            ]))
            return 3
        }
        if !connection.isAlive { runtime.connectionEnded(self) }
    }

    func managedConnection(_ connection: ManagedConnection, willReconnect attempt: Int, delay: TimeAmount) -> ManagedConnection.RetryDecision {
        guard let runtime else { return .init(answer: .stop) }
        let answer = runtime.dispatchReturning(.reconnect, for: self) { lua in
            lua.push(attempt)
            lua.push(Double(delay.nanoseconds) / 1e9)
            return 2
        }
        return runtime.retryDecision(from: answer)
    }

    func managedConnectionHeartbeatMessage(_ connection: ManagedConnection) -> (ByteBuffer, MessageKind)? {
        guard let results = runtime?.dispatchReturning(.heartbeatMessage, for: self, results: 2, push: { _ in 0 }),
            case .string(let bytes) = results[0]
        else { return nil }
        return (ByteBuffer(bytes: bytes), results[1] == .text("binary") ? .binary : .text)
    }

    func managedConnectionDidDrain(_ connection: ManagedConnection) {
        runtime?.dispatch(.drain, for: self) { _ in 0 }
    }

    func managedConnectionReachedBudget(_ connection: ManagedConnection) {
        let stats = connection.stats
        runtime?.warnBudgetReached("connection to \(connection.url)", queued: stats.queued, buffered: stats.buffered)
    }

    func managedConnection(_ connection: ManagedConnection, isHeartbeatReply message: ByteBuffer, kind: MessageKind) -> Bool {
        let answer = runtime?.dispatchReturning(.heartbeatReply, for: self) { lua in
            message.withUnsafeReadableBytes { lua.push(bytes: $0) }
            lua.push(kind: kind)
            return 2
        }
        return answer == .boolean(true)
    }
}
