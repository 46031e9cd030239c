import CLua
import CLuaShim
import CMoonJSON
import MoonwireCore
import NIOCore

extension LuaState {
    /// A message's kind, `"text"` or `"binary"`: pushed with every message, so made
    /// once per state and then pushed from the registry (making it again costs Lua a
    /// hash and a lookup in its string table each time).
    func push(kind: MessageKind) {
        let name = kind.name
        mw_push_constant(L, kind == .text ? 0 : 1, UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self), name.utf8CodeUnitCount)
    }

    /// A received message for the prelude's message dispatchers: `message, kind`; with
    /// a native codec the value decoded from the buffer's bytes (no Lua string on the
    /// way), and when they do not decode `nil, kind, err, raw` (the raw message as a string).
    /// Returns the number of values pushed. The session's userdata is on top of the stack
    /// (the dispatcher pushed it): a protobuf codec's schema is its user value.
    func pushMessage(_ message: ByteBuffer, kind: MessageKind, codec: NativeCodec?) -> Int32 {
        guard let codec else {
            message.withUnsafeReadableBytes { push(bytes: $0) }
            push(kind: kind)
            return 2
        }
        let session = lua_gettop(L)
        let status = message.withUnsafeReadableBytes { codec.decode(L, $0, session: session) }
        if status != LUA_OK {
            // Only running out of memory gets here: the message as a decode error.
            let error = popString()
            pushNil()
            push(error)
        }
        push(kind: kind)
        mw_insert(L, -2)
        if type(at: -1) == LUA_TNIL {
            pop()
            return 2
        }
        message.withUnsafeReadableBytes { push(bytes: $0) }
        return 4
    }
}
