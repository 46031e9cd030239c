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
