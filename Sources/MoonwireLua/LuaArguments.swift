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
/// Arguments are numbered as the caller counts them, which is also the number
/// the messages show: for a method, 1 is the first argument after `self`, and
/// `self` is 0. Only ``index(_:)`` turns a number into a stack index.
///
/// ```swift
/// let seconds = try args.number(1)
/// try args.function(2)
/// ```
public struct LuaArguments {
    public let lua: LuaState
    /// The name shown in messages, e.g. `mw.after` or `timer:cancel`.
    public let function: String
    /// 1 for methods: `self` is on the stack below the arguments the caller counts.
    let selfOffset: Int32

    public init(lua: LuaState, function: String, isMethod: Bool = false) {
        self.lua = lua
        self.function = function
        self.selfOffset = isMethod ? 1 : 0
    }

    /// The stack index of argument `n`.
    @inline(__always)
    public func index(_ n: Int32) -> Int32 { n + selfOffset }

    /// How many arguments the caller passed (`self` not counted).
    public var count: Int32 { lua.top - selfOffset }

    /// Argument 0 is a method's `self`, worded as the prelude's methods (and Lua's own) word it.
    public func error(_ n: Int32, _ message: String) -> LuaArgumentError {
        LuaArgumentError(n == 0 ? "bad self to '\(function)' (\(message))" : "bad argument #\(n) to '\(function)' (\(message))")
    }

    public func typeError(_ n: Int32, expected: String) -> LuaArgumentError {
        let got = lua.type(at: index(n)) == LUA_TNONE ? "no value" : lua.typeName(at: index(n))
        return error(n, "\(expected) expected, got \(got)")
    }

    public func isNoneOrNil(_ n: Int32) -> Bool { mw_isnoneornil(lua.L, index(n)) != 0 }

    /// The Lua type of argument `n` (`LUA_TNONE` when it was not passed).
    public func type(_ n: Int32) -> Int32 { lua.type(at: index(n)) }

    /// `self` of a method: the object of class `name`, else a misuse naming `expected`.
    public func object<T: AnyObject>(class name: String, expected: String, as _: T.Type = T.self) throws(LuaArgumentError) -> T {
        guard let object = lua.object(at: index(0), class: name, as: T.self) else { throw typeError(0, expected: expected) }
        return object
    }

    /// ``object(class:expected:as:)`` for the length of `body`, without retaining it (the
    /// userdata on the stack keeps it alive): for methods called per message.
    func withObject<T: AnyObject, R>(class name: String, expected: String, as _: T.Type = T.self, _ body: (T) throws -> R) throws -> R {
        guard let object = lua.unmanagedObject(at: index(0), class: name, as: T.self) else { throw typeError(0, expected: expected) }
        return try object._withUnsafeGuaranteedRef(body)
    }

    public func number(_ n: Int32) throws(LuaArgumentError) -> Double {
        guard let v = lua.number(at: index(n)) else { throw typeError(n, expected: "number") }
        return v
    }

    public func optionalNumber(_ n: Int32) throws(LuaArgumentError) -> Double? {
        isNoneOrNil(n) ? nil : try number(n)
    }

    public func integer(_ n: Int32) throws(LuaArgumentError) -> Int {
        guard lua.type(at: index(n)) == LUA_TNUMBER else { throw typeError(n, expected: "number") }
        guard let i = lua.integer(at: index(n)) else { throw error(n, "number has no integer representation") }
        return i
    }

    public func optionalInteger(_ n: Int32) throws(LuaArgumentError) -> Int? {
        isNoneOrNil(n) ? nil : try integer(n)
    }

    public func boolean(_ n: Int32) -> Bool { lua.boolean(at: index(n)) }

    /// A string argument's bytes, valid during `body`. Numbers are accepted, as Lua's own
    /// functions accept them.
    public func withBytes<R>(_ n: Int32, _ body: (UnsafeRawBufferPointer) throws(LuaArgumentError) -> R) throws(LuaArgumentError) -> R {
        let t = lua.type(at: index(n))
        guard t == LUA_TSTRING || t == LUA_TNUMBER else { throw typeError(n, expected: "string") }
        var length = 0
        let p = lua_tolstring(lua.L, index(n), &length)
        return try body(UnsafeRawBufferPointer(start: p, count: length))
    }

    public func bytes(_ n: Int32) throws(LuaArgumentError) -> [UInt8] {
        try withBytes(n) { Array($0) }
    }

    public func string(_ n: Int32) throws(LuaArgumentError) -> String {
        try withBytes(n) { String(decoding: $0, as: UTF8.self) }
    }

    /// A table argument (or nil) copied into Swift, e.g. an `opts` table.
    public func value(_ n: Int32) throws(LuaArgumentError) -> LuaValue {
        do {
            return try lua.value(at: index(n))
        } catch {
            throw self.error(n, error.description)
        }
    }

    public func function(_ n: Int32) throws(LuaArgumentError) {
        guard mw_isfunction(lua.L, index(n)) != 0 else { throw typeError(n, expected: "function") }
    }
}

/// Entering Swift from Lua: every binding body runs inside `LuaBinding.run`,
/// which turns a thrown error into the trampoline's raise status, so the Lua
/// error is raised by C after this Swift frame has returned.
public enum LuaBinding {
    /// Runs `body` with the arguments of the call. `wrapped`: the function is called
    /// by a prelude wrapper, so errors are placed at the wrapper's caller.
    @inline(__always)
    public static func run(
        _ L: OpaquePointer?, _ name: String, isMethod: Bool, wrapped: Bool, _ body: (LuaArguments) throws -> Int32
    ) -> Int32 {
        let whereStatus = wrapped ? MW_RAISE_WHERE_CALLER : MW_RAISE_WHERE
        let lua = LuaState(L!)
        do {
            return try body(LuaArguments(lua: lua, function: name, isMethod: isMethod))
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
