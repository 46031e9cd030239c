import HeapModule
import NIOCore

/// A priority queue of deadlines, earliest first; equal deadlines come out in
/// the order they were added. A min-heap (swift-collections' `Heap`) of
/// (deadline, insertion number, element).
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
    private struct Entry: Comparable {
        var deadline: NIODeadline
        var sequence: UInt64
        var element: Element

        static func < (a: Entry, b: Entry) -> Bool {
            a.deadline != b.deadline ? a.deadline < b.deadline : a.sequence < b.sequence
        }

        // Sequences are unique, so two entries are never equal.
        static func == (a: Entry, b: Entry) -> Bool {
            a.deadline == b.deadline && a.sequence == b.sequence
        }
    }

    private var heap = Heap<Entry>()
    private var nextSequence: UInt64 = 0

    public init() {}

    public var count: Int { heap.count }
    public var isEmpty: Bool { heap.isEmpty }

    /// The earliest deadline, if any.
    public var firstDeadline: NIODeadline? { heap.min?.deadline }

    public mutating func insert(_ element: Element, at deadline: NIODeadline) {
        heap.insert(Entry(deadline: deadline, sequence: nextSequence, element: element))
        nextSequence &+= 1
    }

    /// The earliest element, if any.
    public var first: Element? { heap.min?.element }

    /// Removes and returns the earliest element whose deadline is at or before `now`.
    public mutating func popFirst(dueBy now: NIODeadline) -> Element? {
        guard let first = heap.min, first.deadline <= now else { return nil }
        heap.removeMin()
        return first.element
    }

    /// Removes the earliest element; the queue must not be empty.
    public mutating func removeFirst() {
        heap.removeMin()
    }

    /// Removes every element `shouldRemove` picks, wherever it is in the queue; the others
    /// keep their order. O(n).
    public mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        heap = Heap(heap.unordered.filter { !shouldRemove($0.element) })
    }
}
