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

    init(session: MessageSession, codec: NativeCodec?) {
        self.session = session
        self.codec = codec
    }
}
