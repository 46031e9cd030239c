import CLua
import CLuaShim
import CMoonJSON
import CMoonProto

/// `connect --proto` and `listen --proto`: the `.proto` files loaded into a Lua state
/// of its own (mw.protobuf, mw.json and mw.inspect, nothing else); received messages
/// shown decoded and typed lines encoded (resources/protobuf_console.lua).
public final class ProtobufConsole {
    private let vm = LuaVM()
    private let show: LuaReference
    private let encodeLine: LuaReference

    /// Loads `files` (with `importPaths`) for message type `type`; throws the reason in words.
    public init(files: [String], importPaths: [String], type: String) throws(LuaError) {
        let lua = vm.state
        try lua.load(source: PackageResources.protobuf_console_lua, chunkName: "@moonwire/protobuf_console.lua")
        try lua.load(source: PackageResources.protobuf_lua, chunkName: "@moonwire/protobuf.lua")
        try lua.load(source: PackageResources.json_lua, chunkName: "@moonwire/json.lua")
        mw_pushcfunction(lua.L, mw_json_install)
        mw_pushcfunction(lua.L, mw_protobuf_open)
        try lua.load(source: PackageResources.inspect_lua, chunkName: "@moonwire/inspect.lua")
        try lua.call(arguments: 5, results: 1)
        for list in [files, importPaths] {
            lua_createtable(lua.L, Int32(list.count), 0)
            for (i, item) in list.enumerated() {
                lua.push(item)
                lua_rawseti(lua.L, -2, lua_Integer(i + 1))
            }
        }
        lua.push(type)
        try lua.call(arguments: 3, results: 2)
        if lua.type(at: -2) == LUA_TNIL {
            let reason = lua.string(at: -1) ?? "cannot load the .proto files"
            lua.setTop(0)
            throw .runtime(reason)
        }
        encodeLine = lua.reference()
        show = lua.reference()
    }

    /// A received message as text (the decoded message), or why it does not decode.
    public func text(of bytes: [UInt8]) -> Result<String, ProtobufConsoleError> {
        call(show, bytes).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A typed line (a JSON object or a Lua table constructor) as the message's bytes,
    /// or why it does not encode.
    public func encode(_ line: String) -> Result<[UInt8], ProtobufConsoleError> {
        call(encodeLine, Array(line.utf8))
    }

    private func call(_ function: LuaReference, _ input: [UInt8]) -> Result<[UInt8], ProtobufConsoleError> {
        let lua = vm.state
        lua.setTop(0)
        defer { lua.setTop(0) }
        lua.push(function)
        lua.push(input)
        do {
            try lua.call(arguments: 1, results: 2)
        } catch {
            return .failure(ProtobufConsoleError(description: error.description))
        }
        guard lua.type(at: -2) != LUA_TNIL, let result = lua.bytes(at: -2) else {
            return .failure(ProtobufConsoleError(description: lua.string(at: -1) ?? "failed"))
        }
        return .success(result)
    }
}

/// Why a message does not decode or a line does not encode, in words.
public struct ProtobufConsoleError: Error, CustomStringConvertible {
    public let description: String
}
