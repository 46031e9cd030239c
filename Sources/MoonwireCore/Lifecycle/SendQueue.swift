import DequeModule

/// The messages a connection could not send yet, oldest first: sent while it was not
/// open, or while the socket could not take more (a slow or stalled peer).
///
/// The queue is bounded by count (`queue.limit`, 1024 by default) and by bytes
/// (`queue.bytes`, 16 MiB); what happens when a message would pass either bound is the
/// ``Overflow`` rule. Nothing leaves the queue unseen: every message thrown away, by
/// overflow or by ``removeAll()``, counts in ``dropped`` (the script's `stats().dropped`),
/// and an `error` refusal is reported to the sender.
///
/// The byte bound can include bytes held elsewhere (`alsoBuffered`: what the socket has
/// not taken yet), so that one budget covers everything waiting on the way out.
///
/// One queued item can stand for several messages (``mergeIntoLast(size:alsoBuffered:_:)``:
/// small frames made into one buffer as they wait); the count bound, ``count``,
/// ``dropped`` and ``removeAll()`` count messages, not items.
///
/// ```swift
/// var queue = SendQueue<String>(limit: 2, overflow: .dropOldest)
/// queue.enqueue("a", size: 1)      // .queued
/// queue.enqueue("b", size: 1)      // .queued
/// queue.enqueue("c", size: 1)      // .droppedOldest(1)
/// queue.dropped                    // 1
/// while let message = queue.popFirst() {   // "b", "c"
///     send(message)
/// }
/// ```
public struct SendQueue<Message> {
    /// What a full queue does with one more message (`queue.overflow`).
    public enum Overflow: String, Sendable, Hashable, CaseIterable {
        /// Throw away the oldest queued messages to make room for the new one.
        case dropOldest = "drop_oldest"
        /// Throw away the new message; the queue keeps what it had.
        case dropNewest = "drop_newest"
        /// Refuse the new message, so `c:send` returns `nil, "queue full"`.
        case error
    }

    /// What ``enqueue(_:size:alsoBuffered:)`` did.
    public enum EnqueueResult: Sendable, Hashable {
        /// The message is queued.
        case queued
        /// The message is queued; this many of the oldest were thrown away for it.
        case droppedOldest(Int)
        /// The queue was full: the new message was thrown away (`drop_newest`, or
        /// `drop_oldest` when even an empty queue had no room for it).
        case droppedNewest
        /// The queue was full: the new message was refused (`error`) and is not counted as
        /// dropped, since the sender is told.
        case full
        /// The message alone is larger than the byte bound: refused whatever the rule,
        /// not counted as dropped (the sender is told).
        case tooLarge
    }

    /// The most messages the queue holds.
    public let limit: Int
    /// The most bytes waiting, queue and `alsoBuffered` together.
    public let byteLimit: Int
    /// What a full queue does with one more message.
    public let overflow: Overflow
    /// Messages thrown away since the queue was made, by overflow or ``removeAll()``.
    public private(set) var dropped = 0
    /// Bytes of the queued messages.
    public private(set) var bytes = 0
    /// Messages waiting, counting every message an item stands for.
    private var messages = 0

    /// One queued item: a message, or several merged into one.
    public typealias Item = (message: Message, size: Int, count: Int)

    /// The items before the newest, oldest first.
    private var storage = Deque<Item>()
    /// The newest item, kept out of the deque so that merging into it changes it in place
    /// (through the deque's subscript it was copied out and back, twice per message).
    /// Nil exactly when the queue is empty.
    private var last: Item?

    /// Creates an empty queue.
    ///
    /// - Parameters:
    ///   - limit: the most messages it holds; 0 means nothing is ever queued.
    ///   - bytes: the most bytes waiting.
    ///   - overflow: what a full queue does with one more message.
    public init(limit: Int = 1024, bytes: Int = 16 << 20, overflow: Overflow = .error) {
        precondition(limit >= 0, "a queue limit cannot be negative")
        precondition(bytes > 0, "a queue byte bound must be positive")
        self.limit = limit
        self.byteLimit = bytes
        self.overflow = overflow
    }

    /// Messages waiting (`stats().queued`).
    public var count: Int { self.messages }

    /// True when nothing is waiting.
    public var isEmpty: Bool { self.last == nil }

    /// True when one more message of `size` bytes fits, with `alsoBuffered` bytes waiting
    /// elsewhere.
    public func fits(size: Int, alsoBuffered: Int = 0) -> Bool {
        self.messages < self.limit && self.bytes + alsoBuffered + size <= self.byteLimit
    }

    /// Adds a message at the end, applying the overflow rule when it does not fit.
    @discardableResult
    public mutating func enqueue(_ message: Message, size: Int, alsoBuffered: Int = 0) -> EnqueueResult {
        guard size <= self.byteLimit else { return .tooLarge }
        guard !self.fits(size: size, alsoBuffered: alsoBuffered) else {
            self.append(message, size: size)
            return .queued
        }
        switch self.overflow {
        case .error:
            return .full
        case .dropNewest:
            self.dropped += 1
            return .droppedNewest
        case .dropOldest:
            var thrown = 0
            while !self.fits(size: size, alsoBuffered: alsoBuffered), let oldest = self.removeFirstItem() {
                self.bytes -= oldest.size
                self.messages -= oldest.count
                thrown += oldest.count
            }
            guard self.fits(size: size, alsoBuffered: alsoBuffered) else {
                self.dropped += thrown + 1
                return .droppedNewest
            }
            self.dropped += thrown
            self.append(message, size: size)
            return .droppedOldest(thrown)
        }
    }

    /// Adds one more message of `size` bytes to the newest item with `merge` (which
    /// changes the item in place and says whether it took the message), so that it waits
    /// without an item of its own. Only when the message fits without the overflow rule,
    /// and never under `drop_oldest`, which throws the oldest away one message at a time.
    /// Returns false when the message was not merged: the caller enqueues it instead.
    public mutating func mergeIntoLast(size: Int, alsoBuffered: Int = 0, _ merge: (inout Message) -> Bool) -> Bool {
        guard self.overflow != .dropOldest, self.fits(size: size, alsoBuffered: alsoBuffered),
            var item = self.last.take()  // moved out, so its buffer stays uniquely referenced
        else { return false }
        defer { self.last = item }
        guard merge(&item.message) else { return false }
        item.size += size
        item.count += 1
        self.bytes += size
        self.messages += 1
        return true
    }

    /// Takes the oldest message out.
    public mutating func popFirst() -> Message? {
        self.popFirstItem()?.message
    }

    /// Takes the oldest item out, with its size and how many messages it stands for.
    public mutating func popFirstItem() -> Item? {
        guard let first = self.removeFirstItem() else { return nil }
        self.bytes -= first.size
        self.messages -= first.count
        return first
    }

    /// Puts items back at the front, in their order (a flush the transport cut short).
    public mutating func putBack(_ items: [Item]) {
        for item in items.reversed() {
            if self.last == nil { self.last = item } else { self.storage.prepend(item) }
            self.bytes += item.size
            self.messages += item.count
        }
    }

    /// Returns every waiting item, oldest first, and empties the queue.
    public mutating func drain() -> [Message] {
        let messages = self.storage.map(\.message) + (self.last.map { [$0.message] } ?? [])
        self.storage.removeAll()
        self.last = nil
        self.bytes = 0
        self.messages = 0
        return messages
    }

    /// Throws away every waiting message, counting them in ``dropped``, and returns how
    /// many there were: the value `c:close()` returns.
    @discardableResult
    public mutating func removeAll() -> Int {
        let removed = self.messages
        self.dropped += removed
        self.storage.removeAll()
        self.last = nil
        self.bytes = 0
        self.messages = 0
        return removed
    }

    /// Counts messages thrown away outside the queue (a message no transport could carry).
    public mutating func countDropped(_ n: Int) {
        self.dropped += n
    }

    private mutating func removeFirstItem() -> Item? {
        self.storage.popFirst() ?? self.last.take()
    }

    private mutating func append(_ message: Message, size: Int) {
        if let newest = self.last.take() { self.storage.append(newest) }
        self.last = (message, size, 1)
        self.bytes += size
        self.messages += 1
    }
}

extension SendQueue: Sendable where Message: Sendable {}
