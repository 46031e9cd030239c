import CLua
import CLuaShim
import MoonwireCore
import NIOCore

/// A timer as Lua sees it (`mw.after` / `mw.every`): the callback and the
/// userdata are held in the registry while the timer is pending, so a timer
/// whose handle the script dropped still fires.
final class LuaTimer {
    static let className = "moonwire.timer"

    var id: TimerScheduler.ID?
    /// The scheduler it is on: the script's, or the test runner's real-time one.
    weak var scheduler: TimerScheduler?
    var callback: LuaReference?
    var handle: LuaReference?
}

extension ScriptRuntime {
    /// `timer:cancel()`, which is also the timer's `__close`.
    static let timerMethods = LuaFunctions<ScriptRuntime>.methods(of: "timer", [
        LuaFunction("cancel") { rt, args in
            args.lua.push(rt.cancel(try args.object(class: LuaTimer.className, expected: "timer", as: LuaTimer.self)))
            return 1
        },
    ])

    /// `mw.after(seconds, fn)` / `mw.every(seconds, fn)`: fn(timer) runs on the loop.
    func schedule(_ args: LuaArguments, repeating: Bool, on scheduler: TimerScheduler? = nil) throws -> Int32 {
        let timers = scheduler ?? self.timers
        let seconds = try args.number(1)
        try args.function(2)
        guard seconds.isFinite, seconds >= 0, seconds < 1e9 else {
            throw args.error(1, "seconds must be a number from 0 to 1e9")
        }
        guard !repeating || seconds > 0 else { throw args.error(1, "the interval must be more than 0 seconds") }
        let lua = args.lua
        let timer = LuaTimer()
        lua.pushValue(2)
        timer.callback = lua.reference()
        timer.handle = lua.pushHandle(object: timer, class: LuaTimer.className)
        // Rounded up to a whole nanosecond, so that a timer never fires before the time
        // asked for: `mw.after(t - mw.now(), f)` finds `mw.now() >= t` in f. Truncated, a
        // delay of a fraction of a nanosecond was zero, and under --virtual-time, where the
        // clock stands still between timers, a script waiting for `t` so (mw.rate's
        // schedule) asked again for ever.
        let delay = TimeAmount.nanoseconds(Int64((seconds * 1e9).rounded(.up)))
        timer.scheduler = timers
        // Holds the runtime until it fires for the last time or is cancelled (`finish`
        // cancels every timer): a pending timer keeps the script alive anyway.
        timer.id = timers.schedule(after: delay, every: repeating ? delay : nil) {
            self.fire(timer, repeating: repeating)
        }
        return 1
    }

    private func fire(_ timer: LuaTimer, repeating: Bool) {
        guard let callback = timer.callback, let handle = timer.handle else { return }
        lua.push(callback)
        lua.push(handle)
        if !repeating { release(timer) }
        callIntoLua(arguments: 1)
    }

    /// Returns true if the timer was still pending.
    func cancel(_ timer: LuaTimer) -> Bool {
        guard let id = timer.id else { return false }
        (timer.scheduler ?? timers).cancel(id)
        release(timer)
        return true
    }

    private func release(_ timer: LuaTimer) {
        timer.id = nil
        if let callback = timer.callback { lua.release(callback) }
        if let handle = timer.handle { lua.release(handle) }
        timer.callback = nil
        timer.handle = nil
    }
}
