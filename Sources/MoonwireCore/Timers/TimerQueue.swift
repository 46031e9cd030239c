import NIOCore

/// A priority queue of deadlines, earliest first; equal deadlines come out in
/// the order they were added.
///
/// Pure data structure, no I/O: `TimerScheduler` drives it from an event loop.
///
/// ```swift
/// var q = TimerQueue<String>()
/// q.insert("b", at: .uptimeNanoseconds(20))
/// q.insert("a", at: .uptimeNanoseconds(10))
/// q.popFirst(dueBy: .uptimeNanoseconds(15))   // "a"
/// ```
public struct TimerQueue<Element> {
    private struct Entry {
        var deadline: NIODeadline
        var sequence: UInt64
        var element: Element

        func precedes(_ other: Entry) -> Bool {
            deadline != other.deadline ? deadline < other.deadline : sequence < other.sequence
        }
    }

    private var heap: [Entry] = []
    private var nextSequence: UInt64 = 0

    public init() {}

    public var count: Int { heap.count }
    public var isEmpty: Bool { heap.isEmpty }

    /// The earliest deadline, if any.
    public var firstDeadline: NIODeadline? { heap.first?.deadline }

    public mutating func insert(_ element: Element, at deadline: NIODeadline) {
        heap.append(Entry(deadline: deadline, sequence: nextSequence, element: element))
        nextSequence &+= 1
        siftUp(heap.count - 1)
    }

    /// The earliest element, if any.
    public var first: Element? { heap.first?.element }

    /// Removes and returns the earliest element whose deadline is at or before `now`.
    public mutating func popFirst(dueBy now: NIODeadline) -> Element? {
        guard let first = heap.first, first.deadline <= now else { return nil }
        removeFirst()
        return first.element
    }

    /// Removes the earliest element; the queue must not be empty.
    public mutating func removeFirst() {
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            let right = left + 1
            var best = left
            if right < heap.count && heap[right].precedes(heap[left]) { best = right }
            guard heap[best].precedes(heap[parent]) else { return }
            heap.swapAt(best, parent)
            parent = best
        }
    }
}
