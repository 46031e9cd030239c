import CLua
import CMoonJSON
import CMoonPack
import MoonwireCore

/// The codecs that run in native code on a connection's or server's messages
/// (`codec = "json"`, `"msgpack"`, `"cbor"`): declared here once. The prelude learns
/// their names from `host.native_codecs` and leaves decoding (from the received
/// bytes, no Lua string on the way) and encoding (straight into the frame) to Swift.
enum NativeCodec: String, CaseIterable {
    case json, msgpack, cbor

    /// The kind of a sent message when the script does not say: text when valid
    /// UTF-8 for JSON, always binary for the binary formats.
    var defaultKind: MessageKind? { self == .json ? nil : .binary }

    /// Decodes `bytes` in protected mode: pushes the value and nil, or nil and the
    /// message. Returns LUA_OK, or (out of memory) the status with the error pushed.
    func decode(_ L: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        switch self {
        case .json: return mw_json_decode_bytes(L, bytes.baseAddress, bytes.count)
        case .msgpack: return mw_msgpack_decode_bytes(L, bytes.baseAddress, bytes.count)
        case .cbor: return mw_cbor_decode_bytes(L, bytes.baseAddress, bytes.count)
        }
    }

    /// Encodes the value at `index` into `out` (the caller frees it); LUA_OK, or an
    /// error status with "mw.NAME.encode: value.x: ..." pushed.
    func encode(_ L: OpaquePointer, _ index: Int32, into out: UnsafeMutablePointer<mwj_buffer>) -> Int32 {
        switch self {
        case .json: return mw_json_encode_into(L, index, out)
        case .msgpack: return mw_msgpack_encode_into(L, index, out)
        case .cbor: return mw_cbor_encode_into(L, index, out)
        }
    }

    /// What an encode error starts with, taken off when the error names the send instead.
    var encodePrefix: String { "mw.\(rawValue).encode: " }
}

extension NativeCodec {
    /// `opts.codec` as the prelude hands it on: one of the names, or absent.
    init?(_ t: inout LuaOptionTable) throws(LuaArgumentError) {
        guard let name = try t.string("codec") else { return nil }
        guard let codec = NativeCodec(rawValue: name) else {
            throw t.error("codec", "\(NativeCodec.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")) expected, got \"\(name)\"")
        }
        self = codec
    }
}
