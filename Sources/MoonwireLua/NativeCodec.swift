import CLua
import CMoonJSON
import CMoonPack
import CMoonProto
import MoonwireCore

/// The codecs that run in native code on a connection's or server's messages
/// (`codec = "json"`, `"msgpack"`, `"cbor"` and `codec = mw.protobuf.codec(name)`):
/// declared here once. The prelude learns the names from `host.native_codecs` and
/// leaves decoding (from the received bytes, no Lua string on the way) and encoding
/// (straight into the frame) to Swift; a protobuf codec it hands on as its schema and
/// message index (``init(protobufAt:_:)``).
enum NativeCodec {
    case json, msgpack, cbor
    /// Message `index` of the schema userdata that is the session's user value (the
    /// connection's, server's or peer's userdata keeps the schema alive: nothing to
    /// release).
    case protobuf(index: Int32)

    /// The codecs a script names by a string.
    static let named: [(name: String, codec: NativeCodec)] = [("json", .json), ("msgpack", .msgpack), ("cbor", .cbor)]

    /// The kind of a sent message when the script does not say: text when valid
    /// UTF-8 for JSON, always binary for the binary formats.
    var defaultKind: MessageKind? {
        if case .json = self { return nil }
        return .binary
    }

    /// Decodes `bytes` in protected mode: pushes the value and nil, or nil and the
    /// message. Returns LUA_OK, or (out of memory) the status with the error pushed.
    /// `session` is the stack index of the connection's or peer's userdata.
    @inline(__always)
    func decode(_ L: OpaquePointer, _ bytes: UnsafeRawBufferPointer, session: Int32) -> Int32 {
        switch self {
        case .json: return mw_json_decode_bytes(L, bytes.baseAddress, bytes.count)
        case .msgpack: return mw_msgpack_decode_bytes(L, bytes.baseAddress, bytes.count)
        case .cbor: return mw_cbor_decode_bytes(L, bytes.baseAddress, bytes.count)
        case .protobuf(let index): return mw_protobuf_decode_from(L, session, index, bytes.baseAddress, bytes.count)
        }
    }

    /// Encodes the value at `index` into `out` (the caller frees it); LUA_OK, or an
    /// error status with "mw.NAME.encode: value.x: ..." pushed. `session` is the stack
    /// index of the connection's, peer's or server's userdata.
    func encode(_ L: OpaquePointer, _ index: Int32, session: Int32, into out: UnsafeMutablePointer<mwj_buffer>) -> Int32 {
        switch self {
        case .json: return mw_json_encode_into(L, index, out)
        case .msgpack: return mw_msgpack_encode_into(L, index, out)
        case .cbor: return mw_cbor_encode_into(L, index, out)
        case .protobuf(let message): return mw_protobuf_encode_into(L, session, message, index, out)
        }
    }

    /// What an encode error starts with, taken off when the error names the send instead.
    var encodePrefix: String {
        switch self {
        case .json: return "mw.json.encode: "
        case .msgpack: return "mw.msgpack.encode: "
        case .cbor: return "mw.cbor.encode: "
        case .protobuf: return "mw.protobuf.encode: "
        }
    }
}

extension NativeCodec {
    /// `opts.codec` as the prelude hands it on: one of the names, or absent.
    init?(_ t: inout LuaOptionTable) throws(LuaArgumentError) {
        guard let name = try t.string("codec") else { return nil }
        guard let codec = NativeCodec.named.first(where: { $0.name == name })?.codec else {
            throw t.error("codec", "\(NativeCodec.named.map { "\"\($0.name)\"" }.joined(separator: ", ")) expected, got \"\(name)\"")
        }
        self = codec
    }

    /// The protobuf codec the prelude hands `host.connect` and `host.listen` as their
    /// arguments `n` (the schema userdata) and `n + 1` (the message index), or nil
    /// when there is none.
    init?(protobufAt n: Int32, _ args: LuaArguments) throws(LuaArgumentError) {
        if args.isNoneOrNil(n) { return nil }
        let index = try args.integer(n + 1)
        guard mw_protobuf_is_type(args.lua.L, args.index(n), lua_Integer(index)) != 0, let message = Int32(exactly: index) else {
            throw args.error(n, "a protobuf schema and message index expected")
        }
        self = .protobuf(index: message)
    }

    /// Makes the schema at argument `n` (see ``init(protobufAt:_:)``) the user value of
    /// the userdata on top of the stack: a connection's or server's, whose codec it is.
    static func keepSchema(at n: Int32, _ args: LuaArguments) {
        args.lua.pushValue(args.index(n))
        lua_setiuservalue(args.lua.L, -2, 1)
    }
}
