import CLua
import CLuaShim

/// A Swift function Lua can call, declared once: the key Lua finds it under and its
/// body. The ``LuaFunctions`` table it is declared in gives the rest: the name its
/// errors show (the table's prefix and the key, `c:` + `send`) and whether `self`
/// comes first. A body reads its arguments by the numbers the caller counts
/// (``LuaArguments``), which are the numbers its errors show.
///
/// ```swift
/// static let peerMethods = LuaFunctions<ScriptRuntime>.methods(of: "peer", [
///     LuaFunction("pause") { rt, args in
///         let seconds = try args.number(1)   // peer:pause(seconds): argument #1
///         guard seconds >= 0, seconds < 1e9 else { throw args.error(1, "seconds from 0 to 1e9 expected") }
///         try rt.peer(args).peer.pause(for: .seconds(seconds))
///         return 0
///     },
/// ])
/// ```
public struct LuaFunction<Owner: AnyObject> {
    public let key: String
    /// The name errors show when it is not the table's: a private helper of the
    /// prelude (`_over_budget`) raises as what the user called (`c:drain`). Starting
    /// with `:`, a method of the table's object (`:drain` is `c:drain` among `c:`'s
    /// methods and `peer:drain` among `peer:`'s).
    let shownAs: String?
    /// Called by a prelude wrapper: errors are placed at the wrapper's caller.
    let wrapped: Bool
    let body: (Owner, LuaArguments) throws -> Int32

    public init(_ key: String, shownAs: String? = nil, wrapped: Bool = false, _ body: @escaping (Owner, LuaArguments) throws -> Int32) {
        self.key = key
        self.shownAs = shownAs
        self.wrapped = wrapped
        self.body = body
    }
}

/// The functions of one module (`mw.after`) or the methods of one kind of object
/// (`c:send`), as Lua gets them: each is entered through the C trampoline with its
/// own ``LuaFunctionEntry`` as the context.
public struct LuaFunctions<Owner: AnyObject> {
    let prefix: String
    let isMethod: Bool
    let list: [LuaFunction<Owner>]

    /// Methods of `object`: errors say `object:key`, and argument 1 is the one after `self`.
    public static func methods(of object: String, _ list: [LuaFunction<Owner>]) -> Self {
        Self(prefix: object + ":", isMethod: true, list: list)
    }

    /// Functions of `module`: errors say `module.key`.
    public static func functions(of module: String, _ list: [LuaFunction<Owner>]) -> Self {
        Self(prefix: module + ".", isMethod: false, list: list)
    }

    private static func name(shownAs: String?, prefix: String, key: String) -> String {
        guard let shownAs else { return prefix + key }
        return shownAs.hasPrefix(":") ? prefix + shownAs.dropFirst() : shownAs
    }

    /// The functions with `owner` as their first argument, keyed as declared. The entries
    /// are appended to `entries`, which must live as long as Lua can call them (the
    /// owner keeps them, and the owner outlives its Lua state's calls).
    public func bound(to owner: Owner, keeping entries: inout [LuaFunctionEntry]) -> [(key: String, entry: LuaFunctionEntry)] {
        list.map { function in
            let entry = BoundLuaFunction(
                name: Self.name(shownAs: function.shownAs, prefix: prefix, key: function.key), isMethod: isMethod, wrapped: function.wrapped,
                owner: owner, body: function.body
            )
            entries.append(entry)
            return (function.key, entry)
        }
    }
}

/// One registered function: what its trampoline's context points at. Made only by
/// ``LuaFunctions/bound(to:keeping:)``, as a ``BoundLuaFunction`` that knows its owner.
public class LuaFunctionEntry {
    let name: String
    let isMethod: Bool
    let wrapped: Bool

    init(name: String, isMethod: Bool, wrapped: Bool) {
        self.name = name
        self.isMethod = isMethod
        self.wrapped = wrapped
    }

    /// The body, with the owner it was bound to.
    func call(_ args: LuaArguments) throws -> Int32 {
        preconditionFailure("\(name): an entry is made by LuaFunctions.bound, with its owner")
    }

    public var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// The one Swift function every declared binding is entered through.
    public static let enter: mw_swift_fn = { L, context in
        guard let context else { return 0 }
        return Unmanaged<LuaFunctionEntry>.fromOpaque(context)._withUnsafeGuaranteedRef { entry in
            LuaBinding.run(L, entry.name, isMethod: entry.isMethod, wrapped: entry.wrapped) { try entry.call($0) }
        }
    }
}

/// An entry and the owner its body gets, held unretained: the owner keeps its
/// entries and outlives the Lua state's calls into them.
final class BoundLuaFunction<Owner: AnyObject>: LuaFunctionEntry {
    let owner: Unmanaged<Owner>
    let body: (Owner, LuaArguments) throws -> Int32

    init(name: String, isMethod: Bool, wrapped: Bool, owner: Owner, body: @escaping (Owner, LuaArguments) throws -> Int32) {
        self.owner = Unmanaged.passUnretained(owner)
        self.body = body
        super.init(name: name, isMethod: isMethod, wrapped: wrapped)
    }

    override func call(_ args: LuaArguments) throws -> Int32 {
        // Guaranteed, not taken: taking the owner would retain and release it on every call.
        try owner._withUnsafeGuaranteedRef { try body($0, args) }
    }
}

extension LuaState {
    /// Pushes a table of declared functions (see ``LuaFunctions``).
    func push(functions: [(key: String, entry: LuaFunctionEntry)]) {
        lua_createtable(L, 0, Int32(functions.count))
        for (key, entry) in functions {
            push(function: LuaFunctionEntry.enter, context: entry.context)
            setField(key, table: -2)
        }
    }
}
