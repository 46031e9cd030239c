import NIOCore
import NIOPosix

extension ThreadSpecificVariable {
    /// This thread's value while `valid` accepts it; else `make` builds the one it keeps
    /// from then on (per loop thread objects: an embedded loop runs on its caller's thread,
    /// so the ones that belong to a loop check it).
    func currentValue(orMake make: () -> Value, keepingIf valid: (Value) -> Bool = { _ in true }) -> Value {
        if let value = self.currentValue, valid(value) { return value }
        let value = make()
        self.currentValue = value
        return value
    }
}

/// An object of which each event-loop thread has one, for the loop it runs (an embedded
/// loop runs on its caller's thread, so the one kept is checked against the loop asked for).
protocol LoopLocal: AnyObject {
    static var perThread: ThreadSpecificVariable<Self> { get }
    var loop: EventLoop { get }
    init(loop: EventLoop)
}

extension LoopLocal {
    /// The one of `loop`, made on first use. Call on `loop`.
    static func shared(on loop: EventLoop) -> Self {
        perThread.currentValue(orMake: { Self(loop: loop) }, keepingIf: { $0.loop === loop })
    }
}
