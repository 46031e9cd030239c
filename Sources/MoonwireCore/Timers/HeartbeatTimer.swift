import NIOCore

/// The one timer a connection's ``HeartbeatMonitor`` needs, kept on its loop's shared
/// ``TimerScheduler``: 15 000 heartbeats on a loop arm one NIO task, at the earliest of
/// their deadlines, instead of a task (and a promise) each.
///
/// Traffic only moves a heartbeat's deadline later, so ``arm(at:on:_:)`` leaves a timer
/// that fires no later alone; one that fires early finds nothing due and is armed again.
/// All methods must be called on the connection's loop.
struct HeartbeatTimer {
    private var armed: (deadline: NIODeadline, id: TimerScheduler.ID, timers: TimerScheduler)?

    /// Arms the timer at `deadline` unless it is armed no later; nil disarms it. `fire`
    /// must call ``fired()`` first.
    mutating func arm(at deadline: NIODeadline?, on eventLoop: EventLoop, _ fire: @escaping () -> Void) {
        guard let deadline else { return self.disarm() }
        if let armed = self.armed, armed.deadline <= deadline { return }
        self.disarm()
        let timers = TimerScheduler.shared(on: eventLoop)
        self.armed = (deadline, timers.schedule(at: deadline, fire), timers)
    }

    /// The armed timer went off.
    mutating func fired() {
        self.armed = nil
    }

    mutating func disarm() {
        if let armed = self.armed { armed.timers.cancel(armed.id) }
        self.armed = nil
    }
}
