import CLua
import CLuaShim

/// Owns one `lua_State` with the standard libraries open; closes it in `deinit`.
///
/// ```swift
/// let vm = LuaVM()
/// try vm.state.load(source: Array("return 1 + 1".utf8), chunkName: "=example")
/// try vm.state.call(arguments: 0, results: 1)
/// vm.state.integer(at: -1)   // 2
/// ```
public final class LuaVM {
    /// The main thread's stack.
    public let state: LuaState
    /// The state's guard (limits, signals, the watchdog): see CLuaShim.h. Its
    /// flags may be set from any thread.
    public let guardState: OpaquePointer

    /// `ignoringEnvironment`: package.path and package.cpath are Lua's defaults,
    /// whatever LUA_PATH and LUA_CPATH say (`lua -E`).
    public init(ignoringEnvironment: Bool = false) {
        guard let L = mw_newstate() else { fatalError("moonwire: cannot create a Lua state (out of memory)") }
        if ignoringEnvironment {
            lua_pushboolean(L, 1)
            lua_setfield(L, mw_registryindex(), "LUA_NOENV")
        }
        luaL_openlibs(L)
        mw_track_coroutines(L)
        state = LuaState(L)
        guardState = mw_guard_of(L)
    }

    deinit {
        mw_close(state.L)
    }
}

/// A view of one Lua thread's stack (the main one, or a coroutine's inside a
/// binding). It does not own the state.
///
/// All stack operations used by the rest of the target live here and in the
/// other `Lua*` files. None of them can raise a Lua error: they use only the
/// `lua_to*`, `lua_is*`, `lua_raw*` and `lua_push*` families (allocation
/// failures abort, see `mw_newstate`), and every call into Lua goes through
/// `pcall` with a traceback handler.
///
/// Not thread-safe: a state is used by one thread at a time (its event loop's).
public struct LuaState {
    public let L: OpaquePointer

    public init(_ L: OpaquePointer) {
        self.L = L
    }

    public var top: Int32 { lua_gettop(L) }

    public func setTop(_ index: Int32) { lua_settop(L, index) }

    public func pop(_ n: Int32 = 1) { mw_pop(L, n) }

    /// Pushes a copy of the value at `index`.
    public func pushValue(_ index: Int32) { lua_pushvalue(L, index) }

    public func type(at index: Int32) -> Int32 { lua_type(L, index) }

    public func typeName(at index: Int32) -> String { String(cString: lua_typename(L, lua_type(L, index))) }

    /// Makes room for `n` more values; false when Lua's stack limit is reached.
    public func ensureStack(_ n: Int32) -> Bool { lua_checkstack(L, n) != 0 }

    // MARK: Loading and calling

    /// Compiles a chunk and pushes it as a function; on a syntax error pushes nothing
    /// and throws the compiler's `name:line: message`.
    public func load(source: [UInt8], chunkName: String) throws(LuaError) {
        let status = source.withUnsafeBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) { chars in
                mw_loadbuffer(L, chars.baseAddress, chars.count, chunkName)
            }
        }
        guard status == LUA_OK else { throw .runtime(popString()) }
    }

    /// Compiles a file (chunk named after its path, so errors read `path:line: message`).
    public func load(file path: String) throws(LuaError) {
        guard luaL_loadfilex(L, path, "t") == LUA_OK else { throw .runtime(popString()) }
    }

    /// The compiler's `file:line: message` for a file that does not compile, else nil.
    public func compileError(file path: String) -> String? {
        do throws(LuaError) {
            try load(file: path)
            pop()
            return nil
        } catch {
            return error.description
        }
    }

    /// Calls the function below the `arguments` on top of the stack in protected mode.
    /// A Lua error comes back as `LuaError.runtime` with a traceback, or `.exit`
    /// when the code called `mw.exit`.
    public func call(arguments: Int32, results: Int32) throws(LuaError) {
        guard mw_pcall_traceback(L, arguments, results) != LUA_OK else { return }
        if mw_is_exit_sentinel(L, -1) != 0 {
            pop()
            throw .exit
        }
        throw .runtime(popString())
    }

    // MARK: References

    /// Pops the top value and keeps it alive in the registry until `release`.
    public func reference() -> LuaReference {
        LuaReference(id: luaL_ref(L, mw_registryindex()))
    }

    public func push(_ reference: LuaReference) {
        lua_rawgeti(L, mw_registryindex(), lua_Integer(reference.id))
    }

    public func release(_ reference: LuaReference) {
        luaL_unref(L, mw_registryindex(), reference.id)
    }

    // MARK: Functions from Swift

    /// Pushes a Lua function that enters `function` through the C trampoline.
    public func push(function: mw_swift_fn, context: UnsafeMutableRawPointer?) {
        mw_push_swift_function(L, function, context)
    }

    /// Pushes a new empty table with room for `fields` named fields.
    public func newTable(fields: Int32) {
        _ = ensureStack(3)
        lua_createtable(L, 0, fields)
    }

    /// `table[name] = top`, without metamethods; pops the value.
    public func setField(_ name: String, table: Int32) {
        let t = lua_absindex(L, table)
        name.withCString { _ = lua_pushstring(L, $0) }
        mw_insert(L, -2)
        lua_rawset(L, t)
    }

    /// Pushes `table[name]` without metamethods.
    public func getField(_ name: String, table: Int32) {
        let t = lua_absindex(L, table)
        name.withCString { _ = lua_pushstring(L, $0) }
        lua_rawget(L, t)
    }

    /// Pushes the global `name` without metamethods.
    public func getGlobal(_ name: String) {
        lua_rawgeti(L, mw_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        getField(name, table: -1)
        mw_remove(L, -2)
    }

    public func setGlobal(_ name: String) {
        lua_rawgeti(L, mw_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        mw_insert(L, -2)
        setField(name, table: -2)
        pop()
    }

    // MARK: Scalars

    public func pushNil() { lua_pushnil(L) }
    public func push(_ value: Bool) { lua_pushboolean(L, value ? 1 : 0) }
    public func push(_ value: Int) { lua_pushinteger(L, lua_Integer(value)) }
    public func push(_ value: Double) { lua_pushnumber(L, value) }

    /// Pushes the bytes as a Lua string, byte for byte.
    public func push(bytes: UnsafeRawBufferPointer) {
        _ = lua_pushlstring(L, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
    }

    public func push(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { push(bytes: $0) }
    }

    public func push(_ string: String) {
        var s = string
        s.withUTF8 { push(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// A constant string, from its bytes in the binary (no Swift string made).
    public func push(_ string: StaticString) {
        push(bytes: UnsafeRawBufferPointer(start: string.utf8Start, count: string.utf8CodeUnitCount))
    }

    /// The bytes of a string value (numbers are not converted), or nil.
    public func bytes(at index: Int32) -> [UInt8]? {
        withBytes(at: index) { Array($0) }
    }

    /// Calls `body` with the bytes of a string value in place (valid only during the call).
    public func withBytes<R>(at index: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R? {
        guard lua_type(L, index) == LUA_TSTRING else { return nil }
        var length = 0
        guard let p = lua_tolstring(L, index, &length) else { return nil }
        return body(UnsafeRawBufferPointer(start: p, count: length))
    }

    /// A string value decoded as UTF-8 (invalid bytes replaced), or nil.
    public func string(at index: Int32) -> String? {
        withBytes(at: index) { String(decoding: $0, as: UTF8.self) }
    }

    public func integer(at index: Int32) -> Int? {
        var ok: Int32 = 0
        let v = mw_tointeger(L, index, &ok)
        return ok != 0 ? Int(v) : nil
    }

    public func number(at index: Int32) -> Double? {
        guard lua_type(L, index) == LUA_TNUMBER else { return nil }
        return mw_tonumber(L, index, nil)
    }

    public func boolean(at index: Int32) -> Bool { lua_toboolean(L, index) != 0 }

    /// Pops the top value and returns it as a string, whatever its type.
    func popString() -> String {
        defer { pop() }
        return string(at: -1) ?? "(error object is a \(typeName(at: -1)) value)"
    }
}

/// A value kept alive in the Lua registry.
public struct LuaReference: Hashable, Sendable {
    public let id: Int32
}

/// Why a call into Lua did not complete.
public enum LuaError: Error, Equatable, CustomStringConvertible {
    /// A compile or runtime error: `file:line: message`, with a traceback for runtime errors.
    case runtime(String)
    /// The code called `mw.exit`.
    case exit

    public var description: String {
        switch self {
        case .runtime(let message): return message
        case .exit: return "mw.exit"
        }
    }
}
