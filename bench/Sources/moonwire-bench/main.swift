// Micro-benchmarks of the Lua bridge: the cost of one Lua -> Swift call, of
// one Swift -> Lua callback, and of delivering one message to a Lua on_message
// callback (dispatch), in nanoseconds. Run in release:
//   swift run -c release moonwire-bench [--json] [iterations]
// --json prints one JSON line instead of the text report.
import CLuaShim
import Foundation
import MoonwireLua

#if canImport(Glibc)
import Glibc
#endif

func seconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

final class Counter {
    var calls = 0
}

let options = CommandLine.arguments.dropFirst()
let json = options.contains("--json")
let iterations = options.first { $0 != "--json" }.flatMap(Int.init) ?? 5_000_000
let vm = LuaVM()
let lua = vm.state
let counter = Counter()

// A Swift binding as every mw function is built: declared, entered through the
// trampoline with its entry as context, argument check, result.
var entries: [LuaFunctionEntry] = []
let benchFunctions = LuaFunctions<Counter>.functions(of: "bench", [
    LuaFunction("swift") { counter, args in
        counter.calls += Int(try args.integer(1))
        return 0
    },
])
for (_, entry) in benchFunctions.bound(to: counter, keeping: &entries) {
    lua.push(function: LuaFunctionEntry.enter, context: entry.context)
}
lua.setGlobal("swift_fn")

func runLua(_ source: String) -> Double {
    try! lua.load(source: Array(source.utf8), chunkName: "=bench")
    lua.push(iterations)
    let start = seconds()
    try! lua.call(arguments: 1, results: 0)
    return seconds() - start
}

// The loop and a call to a Lua function, to subtract from the Swift call.
let luaCall = runLua("local n = ... local function f(x) end for i = 1, n do f(1) end")
let swiftCall = runLua("local n = ... local f = swift_fn for i = 1, n do f(1) end")
precondition(counter.calls == iterations)

// Swift -> Lua: what a timer or a message does, a registry lookup, one argument, pcall with traceback handler.
try! lua.load(source: Array("local count = 0 return function(x) count = count + x end".utf8), chunkName: "=callback")
try! lua.call(arguments: 0, results: 1)
let callback = lua.reference()
let start = seconds()
for _ in 0..<iterations {
    lua.push(callback)
    lua.push(1)
    try! lua.call(arguments: 1, results: 0)
}
let callbackTime = seconds() - start

// Dispatch: a message handed to a connection reaches the script's on_message.
let dispatchIterations = max(1, iterations / 5)
let dispatch = try! DispatchBenchmark.run(iterations: dispatchIterations)
precondition(dispatch.delivered == dispatchIterations, "the callback saw \(dispatch.delivered) messages")

func perCall(_ t: Double) -> Double { t / Double(iterations) * 1e9 }
func ns(_ value: Double) -> String { String(format: "%.1f", value) }
if json {
    print(
        "{\"iterations\":\(iterations),\"lua_to_swift_ns\":\(ns(perCall(swiftCall))),"
            + "\"lua_to_lua_ns\":\(ns(perCall(luaCall))),\"bridge_overhead_ns\":\(ns(perCall(swiftCall - luaCall))),"
            + "\"swift_to_lua_ns\":\(ns(perCall(callbackTime))),\"dispatch_ns\":\(ns(dispatch.nanosecondsPerMessage))}"
    )
} else {
    print("iterations: \(iterations)")
    print("lua -> swift call:      \(ns(perCall(swiftCall))) ns/call (a Lua -> Lua call in the same loop: \(ns(perCall(luaCall))) ns)")
    print("lua -> swift overhead:  \(ns(perCall(swiftCall - luaCall))) ns/call")
    print("swift -> lua callback:  \(ns(perCall(callbackTime))) ns/call")
    print("message dispatch:       \(ns(dispatch.nanosecondsPerMessage)) ns/message (\(dispatchIterations) messages, 32 B, into on_message)")
}
withExtendedLifetime(vm) {}
withExtendedLifetime(counter) {}
