import MoonwireCore

/// The Lua side of one connection in either role: a client's (`mw.connect`, a
/// ``LuaConnection``) or a server's peer (`on_connect`'s `peer`, a ``LuaPeer``). The
/// methods both roles have (`send`, `ping`, `close`, `stats`, `drain`, ...) are declared
/// once (``ScriptRuntime/sessionMethods``) and reach the Core session through this,
/// whichever of the two userdata classes `self` is; the events both roles have
/// (`message`, `drain`) enter Lua through one dispatcher each.
class LuaSession {
    /// The Core connection: ``ManagedConnection`` or ``ServerPeer``.
    let session: MessageSession
    /// Its userdata, while Lua may hear of it.
    var handle: LuaReference?
    /// `codec = "json"`, `"msgpack"`, `"cbor"` or a protobuf codec (a peer's is its
    /// server's): messages are decoded from their bytes and sends encoded straight into
    /// the frame, by the native codec.
    var codec: NativeCodec?
    /// The script's one `on_message` handler while `events.message` would do nothing
    /// but call it (no waiter, no codec of Lua's, no auto_reply rules, no heartbeat
    /// reply): the session's messages go straight to it. The prelude sets it
    /// (`reroute`, prelude/connections.lua) whenever one of those changes.
    var route: LuaReference?

    init(session: MessageSession, codec: NativeCodec?) {
        self.session = session
        self.codec = codec
    }

    /// The session ended for good: Lua hears of it no more, and may collect its userdata
    /// and its route once the script drops them.
    func releaseReferences(in lua: LuaState) {
        if let handle { lua.release(handle) }
        if let route { lua.release(route) }
        handle = nil
        route = nil
    }
}
