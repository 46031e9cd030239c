import MoonwireCore
import NIOCore

/// A connection as Lua sees it: the userdata returned by `mw.connect`, whose
/// events go to the prelude's dispatchers (handlers, receive/request waiters).
///
/// While the connection is alive (open, or on its way to be) the runtime holds
/// it and the userdata, so a script that dropped its handle still gets events
/// and keeps running.
final class LuaConnection: ManagedConnectionDelegate {
    static let className = "moonwire.connection"

    unowned let runtime: ScriptRuntime
    let connection: ManagedConnection
    var handle: LuaReference?

    init(runtime: ScriptRuntime, connection: ManagedConnection) {
        self.runtime = runtime
        self.connection = connection
    }

    func managedConnectionDidOpen(_ connection: ManagedConnection, info: ManagedConnection.OpenInfo) {
        runtime.dispatch(.open, for: self) { lua in
            var headers: [LuaValue: LuaValue] = [:]
            for (name, value) in info.headers { headers[.text(name.lowercased())] = .text(value) }
            var table: [LuaValue: LuaValue] = [.text("headers"): .table(headers), .text("reconnects"): .integer(Int64(info.reconnects))]
            if let p = info.subprotocol { table[.text("protocol")] = .text(p) }
            lua.push(LuaValue.table(table))
            return 1
        }
    }

    func managedConnection(_ connection: ManagedConnection, didReceive message: ByteBuffer, kind: WebSocketMessageKind) {
        runtime.dispatch(.message, for: self) { lua in
            message.withUnsafeReadableBytes { lua.push(bytes: $0) }
            lua.push(kind == .text ? "text" : "binary")
            return 2
        }
    }

    func managedConnection(_ connection: ManagedConnection, didFail error: String) {
        let final = !connection.isAlive
        runtime.dispatch(.error, for: self) { lua in
            lua.push(error)
            lua.push(final)
            return 2
        }
        if final { runtime.connectionEnded(self) }
    }

    func managedConnection(_ connection: ManagedConnection, didClose info: ManagedConnection.CloseInfo) {
        runtime.dispatch(.close, for: self) { lua in
            lua.push(Int(info.code))
            lua.push(info.reason)
            lua.push(LuaValue.table([
                .text("clean"): .boolean(info.clean),
                .text("by"): .text(info.by.rawValue),
                .text("will_reconnect"): .boolean(info.willReconnect),
            ]))
            return 3
        }
        if !connection.isAlive { runtime.connectionEnded(self) }
    }
}
