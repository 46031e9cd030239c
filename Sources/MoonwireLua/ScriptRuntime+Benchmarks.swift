import MoonwireCore
import NIOCore

// What moonwire-bench (bench/Sources/moonwire-bench) needs to reach past the socket;
// the benchmarks themselves live there. `@_spi(Benchmarks) import MoonwireLua`.
extension ScriptRuntime {
    /// Hands `message` to the script's first open connection `times` times, as its
    /// channel does when a whole message arrived (the prelude's dispatcher, then
    /// `on_message`), with no socket read around it. False while no connection is open.
    /// Call on ``eventLoop``.
    @_spi(Benchmarks) public func deliverToOpenConnection(_ message: ByteBuffer, kind: MessageKind, times: Int) -> Bool {
        guard let open = self.connections.values.first(where: { $0.connection.state == "open" }) else { return false }
        for _ in 0..<times {
            open.managedConnection(open.connection, didReceive: message, kind: kind)
        }
        return true
    }

    /// The script's Lua state. Call on ``eventLoop``.
    @_spi(Benchmarks) public var luaState: LuaState { self.lua }
}
