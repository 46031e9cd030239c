import Testing

@testable import MoonwireCore

extension LifecycleTests {
    @Suite struct SendQueueTests {
        @Test func drainsInOrderAndEmpties() {
            var queue = SendQueue<Int>()
            for i in 1...5 { #expect(queue.enqueue(i, size: 1) == .queued) }
            #expect(queue.count == 5)
            #expect(queue.drain() == [1, 2, 3, 4, 5])
            #expect(queue.isEmpty)
            #expect(queue.drain() == [])
            #expect(queue.dropped == 0)
        }

        @Test func defaultsAreSpecs() {
            let queue = SendQueue<String>()
            #expect(queue.limit == 1024)
            #expect(queue.byteLimit == 16 << 20)
            #expect(queue.overflow == .error)
        }

        @Test func overflowNamesAreTheScriptsStrings() {
            #expect(SendQueue<Int>.Overflow.allCases.map(\.rawValue) == ["drop_oldest", "drop_newest", "error"])
            #expect(SendQueue<Int>.Overflow(rawValue: "drop_oldest") == .dropOldest)
            #expect(SendQueue<Int>.Overflow(rawValue: "oldest") == nil)
        }

        struct OverflowCase: Sendable, CustomTestStringConvertible {
            var overflow: SendQueue<Int>.Overflow
            var results: [SendQueue<Int>.EnqueueResult]
            var kept: [Int]
            var dropped: Int
            var testDescription: String { overflow.rawValue }
        }

        // Five messages into a queue of three.
        @Test(arguments: [
            OverflowCase(overflow: .dropOldest, results: [.queued, .queued, .queued, .droppedOldest(1), .droppedOldest(1)], kept: [3, 4, 5], dropped: 2),
            OverflowCase(overflow: .dropNewest, results: [.queued, .queued, .queued, .droppedNewest, .droppedNewest], kept: [1, 2, 3], dropped: 2),
            OverflowCase(overflow: .error, results: [.queued, .queued, .queued, .full, .full], kept: [1, 2, 3], dropped: 0),
        ])
        func overflowPolicies(_ c: OverflowCase) {
            var queue = SendQueue<Int>(limit: 3, overflow: c.overflow)
            let results = (1...5).map { queue.enqueue($0, size: 1) }
            #expect(results == c.results)
            #expect(queue.count == 3)
            #expect(queue.dropped == c.dropped)
            #expect(queue.drain() == c.kept)
        }

        @Test(arguments: SendQueue<Int>.Overflow.allCases)
        func aZeroLimitQueuesNothing(_ overflow: SendQueue<Int>.Overflow) {
            var queue = SendQueue<Int>(limit: 0, overflow: overflow)
            let result = queue.enqueue(1, size: 1)
            #expect(queue.isEmpty)
            switch overflow {
            case .error:
                #expect(result == .full)
                #expect(queue.dropped == 0)
            case .dropOldest, .dropNewest:
                #expect(result == .droppedNewest)
                #expect(queue.dropped == 1)
            }
        }

        @Test func removeAllCountsWhatItDrops() {
            var queue = SendQueue<String>(limit: 2, overflow: .dropNewest)
            queue.enqueue("a", size: 1)
            queue.enqueue("b", size: 1)
            queue.enqueue("c", size: 1)
            #expect(queue.dropped == 1)
            #expect(queue.removeAll() == 2)
            #expect(queue.isEmpty)
            #expect(queue.dropped == 3)
            #expect(queue.removeAll() == 0)
            #expect(queue.dropped == 3)
        }

        @Test func longDropOldestRunKeepsTheNewestInOrder() {
            // Enough turnover to make the head index compact several times.
            var queue = SendQueue<Int>(limit: 100, overflow: .dropOldest)
            for i in 0..<10_000 { queue.enqueue(i, size: 1) }
            #expect(queue.count == 100)
            #expect(queue.dropped == 9_900)
            #expect(queue.drain() == Array(9_900..<10_000))
            queue.enqueue(-1, size: 1)
            #expect(queue.drain() == [-1])
        }

        @Test func theByteBoundCountsWhatIsBufferedElsewhere() {
            var queue = SendQueue<String>(limit: 10, bytes: 100, overflow: .error)
            #expect(queue.enqueue("a", size: 60) == .queued)
            #expect(queue.enqueue("b", size: 30, alsoBuffered: 20) == .full)
            #expect(queue.enqueue("b", size: 30, alsoBuffered: 10) == .queued)
            #expect(queue.bytes == 90)
            #expect(queue.enqueue("huge", size: 101) == .tooLarge)
            #expect(queue.dropped == 0)
            #expect(queue.popFirst() == "a")
            #expect(queue.bytes == 30)
        }

        @Test func dropOldestMakesRoomByBytes() {
            var queue = SendQueue<Int>(limit: 10, bytes: 100, overflow: .dropOldest)
            for i in 1...4 { queue.enqueue(i, size: 25) }
            // 60 bytes need three of the 25-byte messages to go.
            #expect(queue.enqueue(5, size: 60) == .droppedOldest(3))
            #expect(queue.dropped == 3)
            #expect(queue.bytes == 85)
            #expect(queue.drain() == [4, 5])
            // Room the bytes held elsewhere take cannot be made: the new one goes.
            #expect(queue.enqueue(6, size: 50, alsoBuffered: 60) == .droppedNewest)
            #expect(queue.dropped == 4)
        }

        @Test func mergedMessagesCountOneByOneInEveryBound() {
            // Items are strings; a merge appends to the newest one.
            var queue = SendQueue<String>(limit: 4, bytes: 100, overflow: .error)
            #expect(!queue.mergeIntoLast(size: 1) { $0 += "x"; return true })  // nothing to merge into
            #expect(queue.enqueue("a", size: 10) == .queued)
            #expect(queue.mergeIntoLast(size: 10) { $0 += "b"; return true })
            #expect(queue.mergeIntoLast(size: 10) { $0 += "c"; return true })
            #expect(queue.count == 3)
            #expect(queue.bytes == 30)
            // The item said no: nothing changes.
            #expect(!queue.mergeIntoLast(size: 10) { _ in false })
            #expect(queue.count == 3)
            // Past the byte bound, or the count bound: not merged (the caller's enqueue applies the rule).
            #expect(!queue.mergeIntoLast(size: 80) { $0 += "huge"; return true })
            #expect(queue.mergeIntoLast(size: 10) { $0 += "d"; return true })
            #expect(!queue.mergeIntoLast(size: 1) { $0 += "e"; return true })
            #expect(queue.enqueue("e", size: 1) == .full)
            #expect(queue.count == 4)
            let item = queue.popFirstItem()
            #expect(item?.message == "abcd" && item?.size == 40 && item?.count == 4)
            #expect(queue.isEmpty && queue.count == 0 && queue.bytes == 0)
            // Put back whole; removeAll counts every message in it.
            queue.putBack([item!])
            #expect(queue.count == 4 && queue.bytes == 40)
            #expect(queue.removeAll() == 4)
            #expect(queue.dropped == 4)
        }

        @Test func dropOldestNeverMerges() {
            // drop_oldest throws messages away one at a time, so each keeps its own item.
            var queue = SendQueue<String>(limit: 4, overflow: .dropOldest)
            queue.enqueue("a", size: 1)
            #expect(!queue.mergeIntoLast(size: 1) { $0 += "b"; return true })
            #expect(queue.drain() == ["a"])
        }

        @Test func usableAgainAfterDrain() {
            var queue = SendQueue<Int>(limit: 2, overflow: .dropOldest)
            queue.enqueue(1, size: 1)
            queue.enqueue(2, size: 1)
            queue.enqueue(3, size: 1)
            #expect(queue.drain() == [2, 3])
            #expect(queue.enqueue(4, size: 1) == .queued)
            #expect(queue.enqueue(5, size: 1) == .queued)
            #expect(queue.enqueue(6, size: 1) == .droppedOldest(1))
            #expect(queue.drain() == [5, 6])
            #expect(queue.dropped == 2)
        }
    }
}
