import CLua
import CLuaShim
import CMoonJSON
import CMoonPack
import CMoonProto

/// The console codec of `connect`, `listen` and `replay` (`--proto FILE --type NAME`,
/// `--msgpack`, `--cbor`): a Lua state of its own (mw.json, mw.msgpack/mw.cbor,
/// mw.protobuf and mw.inspect, nothing else) in which binary messages are shown
/// decoded and typed lines encoded (resources/console_codec.lua).
public final class ConsoleCodec {
    /// Which format the binary messages are in.
    public enum Format: Equatable {
        /// Every message is a `type` of the `.proto` files (their imports under `importPaths`).
        case protobuf(files: [String], importPaths: [String], type: String)
        case msgpack, cbor

        var name: String {
            switch self {
            case .protobuf: return "protobuf"
            case .msgpack: return "msgpack"
            case .cbor: return "cbor"
            }
        }
    }

    private let vm = LuaVM()
    private let show: LuaReference
    private let encodeLine: LuaReference
    private let valueJSON: LuaReference

    /// Sets up `format` (loading the `.proto` files for protobuf); throws the reason in words.
    public init(_ format: Format) throws(LuaError) {
        let lua = vm.state
        try lua.load(source: PackageResources.console_codec_lua, chunkName: "@moonwire/console_codec.lua")
        try lua.load(source: PackageResources.json_lua, chunkName: "@moonwire/json.lua")
        mw_pushcfunction(lua.L, mw_json_install)
        mw_pushcfunction(lua.L, mw_pack_install)
        try lua.load(source: PackageResources.protobuf_lua, chunkName: "@moonwire/protobuf.lua")
        mw_pushcfunction(lua.L, mw_protobuf_open)
        try lua.load(source: PackageResources.inspect_lua, chunkName: "@moonwire/inspect.lua")
        try lua.call(arguments: 6, results: 1)
        var files: [String] = [], importPaths: [String] = [], type = ""
        if case .protobuf(let f, let i, let t) = format { (files, importPaths, type) = (f, i, t) }
        lua.push(format.name)
        for list in [files, importPaths] {
            lua_createtable(lua.L, Int32(list.count), 0)
            for (i, item) in list.enumerated() {
                lua.push(item)
                lua_rawseti(lua.L, -2, lua_Integer(i + 1))
            }
        }
        lua.push(type)
        try lua.call(arguments: 4, results: 3)
        if lua.type(at: -3) == LUA_TNIL {
            let reason = lua.string(at: -2) ?? "cannot set up the codec"
            lua.setTop(0)
            throw .runtime(reason)
        }
        valueJSON = lua.reference()
        encodeLine = lua.reference()
        show = lua.reference()
    }

    /// A received message as text (the decoded message), or why it does not decode.
    public func text(of bytes: [UInt8]) -> Result<String, ConsoleCodecError> {
        call(show, bytes).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A message's decoded value as JSON text (what JSON cannot hold, such as a byte
    /// string, as the text ``text(of:)`` gives it), or why it does not decode or is
    /// not JSON: what `replay --serve/--client` matches binary messages by.
    public func json(of bytes: [UInt8]) -> Result<[UInt8], ConsoleCodecError> {
        call(valueJSON, bytes)
    }

    /// A typed line (JSON, or a Lua value constructor) as the message's bytes, or why
    /// it does not encode.
    public func encode(_ line: String) -> Result<[UInt8], ConsoleCodecError> {
        call(encodeLine, Array(line.utf8))
    }

    private func call(_ function: LuaReference, _ input: [UInt8]) -> Result<[UInt8], ConsoleCodecError> {
        let lua = vm.state
        lua.setTop(0)
        defer { lua.setTop(0) }
        lua.push(function)
        lua.push(input)
        do {
            try lua.call(arguments: 1, results: 2)
        } catch {
            return .failure(ConsoleCodecError(description: error.description))
        }
        guard lua.type(at: -2) != LUA_TNIL, let result = lua.bytes(at: -2) else {
            return .failure(ConsoleCodecError(description: lua.string(at: -1) ?? "failed"))
        }
        return .success(result)
    }
}

/// Why a message does not decode or a line does not encode, in words.
public struct ConsoleCodecError: Error, CustomStringConvertible {
    public let description: String
}
