import CLua
import CLuaShim

/// Swift objects handed to Lua as full userdata with a named metatable.
///
/// The userdata holds one retained reference; `__gc` (or an explicit release)
/// gives it back, after which the userdata is an empty shell that the checks
/// below refuse.
extension LuaState {
    /// Creates the metatable `name` with `__index` = the methods (declared as
    /// ``LuaFunctions``), `__gc` that releases the Swift object and, if given,
    /// `__close`: the method with that key.
    func registerClass(_ name: String, methods: [(key: String, entry: LuaFunctionEntry)], close: String? = nil) {
        guard luaL_newmetatable(L, name) != 0 else {
            pop()
            return
        }
        push(functions: methods)
        setField("__index", table: -2)
        mw_pushcfunction(L, releaseObjectFunction)
        setField("__gc", table: -2)
        if let close, let method = methods.first(where: { $0.key == close }) {
            push(function: LuaFunctionEntry.enter, context: method.entry.context)
            setField("__close", table: -2)
        }
        pop()
    }

    /// Pushes the metatable of class `name`.
    public func getMetatable(named name: String) {
        mw_getmetatable_named(L, name)
    }

    /// Pushes a new userdata of class `name` that keeps `object` alive.
    public func push(object: AnyObject, class name: String) {
        let slot = mw_newuserdata(L, MemoryLayout<UnsafeMutableRawPointer?>.size)!
        slot.storeBytes(of: Unmanaged.passRetained(object).toOpaque(), as: UnsafeMutableRawPointer?.self)
        mw_getmetatable_named(L, name)
        lua_setmetatable(L, -2)
    }

    /// Pushes a new userdata of class `name` for `object`, as ``push(object:class:)``,
    /// and returns a reference to it: the handle by which Swift finds the object's Lua
    /// side again (a connection's, a server's, a peer's, a timer's).
    public func pushHandle(object: AnyObject, class name: String) -> LuaReference {
        push(object: object, class: name)
        pushValue(-1)
        return reference()
    }

    /// The object behind a userdata of class `name`, or nil (another type, or already released).
    public func object<T: AnyObject>(at index: Int32, class name: String, as _: T.Type = T.self) -> T? {
        unmanagedObject(at: index, class: name)?.takeUnretainedValue()
    }

    /// The object behind a userdata of class `name`, not retained: the userdata keeps it
    /// alive while the userdata is reachable, as a function's argument on the stack is.
    func unmanagedObject<T: AnyObject>(at index: Int32, class name: String, as _: T.Type = T.self) -> Unmanaged<T>? {
        // withCString: the class names are literals, read in place (the implicit
        // conversion built a C string on the heap per method call).
        guard let slot = name.withCString({ mw_testudata(L, index, $0) }),
            let pointer = slot.load(as: UnsafeMutableRawPointer?.self)
        else { return nil }
        // One Swift class per metatable name (push(object:class:) is the only way in),
        // so the name check stands for the type check; a dynamic cast would cost a
        // conformance lookup on every method call.
        assert(Unmanaged<AnyObject>.fromOpaque(pointer).takeUnretainedValue() is T)
        return Unmanaged<T>.fromOpaque(pointer)
    }
}

/// `__gc` of every class: releases the Swift object once. Plain C-convention
/// Swift with no Lua call that can raise, so it needs no trampoline.
private let releaseObjectFunction: lua_CFunction = { L in
    guard let L, let slot = lua_touserdata(L, 1),
        let pointer = slot.load(as: UnsafeMutableRawPointer?.self)
    else { return 0 }
    slot.storeBytes(of: nil, as: UnsafeMutableRawPointer?.self)
    Unmanaged<AnyObject>.fromOpaque(pointer).release()
    return 0
}
