import CLua
import CLuaShim

/// A misuse by the script (a wrong argument type, an unknown option key),
/// raised in Lua as an error at the caller's line.
public struct LuaArgumentError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// The arguments of one call from Lua into a Swift binding, with checks that
/// throw `LuaArgumentError` messages in Lua's own wording:
/// `bad argument #1 to 'mw.after' (number expected, got string)`.
///
/// ```swift
/// let seconds = try args.number(1)
/// try args.function(2)
/// ```
public struct LuaArguments {
    public let lua: LuaState
    /// The name shown in messages, e.g. `mw.after` or `timer:cancel`.
    public let function: String
    /// 1 for methods: `self` is argument 1 on the stack but not counted in messages.
    let selfOffset: Int32

    public init(lua: LuaState, function: String, isMethod: Bool = false) {
        self.lua = lua
        self.function = function
        self.selfOffset = isMethod ? 1 : 0
    }

    public var count: Int32 { lua.top }

    public func error(_ index: Int32, _ message: String) -> LuaArgumentError {
        LuaArgumentError("bad argument #\(index - selfOffset) to '\(function)' (\(message))")
    }

    public func typeError(_ index: Int32, expected: String) -> LuaArgumentError {
        let got = lua.type(at: index) == LUA_TNONE ? "no value" : lua.typeName(at: index)
        return error(index, "\(expected) expected, got \(got)")
    }

    public func isNoneOrNil(_ index: Int32) -> Bool { mw_isnoneornil(lua.L, index) != 0 }

    public func number(_ index: Int32) throws(LuaArgumentError) -> Double {
        guard let n = lua.number(at: index) else { throw typeError(index, expected: "number") }
        return n
    }

    public func optionalNumber(_ index: Int32) throws(LuaArgumentError) -> Double? {
        isNoneOrNil(index) ? nil : try number(index)
    }

    public func integer(_ index: Int32) throws(LuaArgumentError) -> Int {
        guard lua.type(at: index) == LUA_TNUMBER else { throw typeError(index, expected: "number") }
        guard let i = lua.integer(at: index) else { throw error(index, "number has no integer representation") }
        return i
    }

    public func optionalInteger(_ index: Int32) throws(LuaArgumentError) -> Int? {
        isNoneOrNil(index) ? nil : try integer(index)
    }

    /// A string argument's bytes, valid during `body`. Numbers are accepted, as Lua's own
    /// functions accept them.
    public func withBytes<R>(_ index: Int32, _ body: (UnsafeRawBufferPointer) throws(LuaArgumentError) -> R) throws(LuaArgumentError) -> R {
        let t = lua.type(at: index)
        guard t == LUA_TSTRING || t == LUA_TNUMBER else { throw typeError(index, expected: "string") }
        var length = 0
        let p = lua_tolstring(lua.L, index, &length)
        return try body(UnsafeRawBufferPointer(start: p, count: length))
    }

    public func bytes(_ index: Int32) throws(LuaArgumentError) -> [UInt8] {
        try withBytes(index) { Array($0) }
    }

    public func string(_ index: Int32) throws(LuaArgumentError) -> String {
        try withBytes(index) { String(decoding: $0, as: UTF8.self) }
    }

    /// A table argument (or nil) copied into Swift, e.g. an `opts` table.
    public func value(_ index: Int32) throws(LuaArgumentError) -> LuaValue {
        do {
            return try lua.value(at: index)
        } catch {
            throw self.error(index, error.description)
        }
    }

    public func function(_ index: Int32) throws(LuaArgumentError) {
        guard mw_isfunction(lua.L, index) != 0 else { throw typeError(index, expected: "function") }
    }
}

/// Entering Swift from Lua: every binding body runs inside `LuaBinding.enter`,
/// which turns a thrown error into the trampoline's raise status, so the Lua
/// error is raised by C after this Swift frame has returned.
public enum LuaBinding {
    /// Runs `body` with the context object the function was registered with.
    @inline(__always)
    /// `wrapped`: the function is called by a prelude wrapper, so errors are
    /// placed at the wrapper's caller.
    public static func enter<Context: AnyObject>(
        _ L: OpaquePointer?, _ context: UnsafeMutableRawPointer?, _ name: String, isMethod: Bool = false,
        wrapped: Bool = false, as _: Context.Type, _ body: (Context, LuaArguments) throws -> Int32
    ) -> Int32 {
        let whereStatus = wrapped ? MW_RAISE_WHERE_CALLER : MW_RAISE_WHERE
        let lua = LuaState(L!)
        let owner = Unmanaged<Context>.fromOpaque(context!).takeUnretainedValue()
        do {
            return try body(owner, LuaArguments(lua: lua, function: name, isMethod: isMethod))
        } catch let error as LuaArgumentError {
            lua.push(error.description)
            return whereStatus
        } catch LuaError.exit {
            mw_push_exit_sentinel(lua.L)
            return MW_RAISE
        } catch {
            lua.push("\(name): \(error)")
            return whereStatus
        }
    }
}
