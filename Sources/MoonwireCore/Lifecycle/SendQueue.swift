/// The messages a script sent while its connection was not open, waiting to go out in
/// order right after the next `on_open` handlers ran.
///
/// The queue is bounded (`queue.limit`, 1024 by default) and what happens when a message
/// arrives at a full queue is the ``Overflow`` rule. Nothing leaves the queue unseen:
/// every message thrown away, by overflow or by ``removeAll()``, counts in ``dropped``
/// (the script's `stats().dropped`), and an `error` refusal is reported to the sender.
///
/// ```swift
/// var queue = SendQueue<String>(limit: 2, overflow: .dropOldest)
/// queue.enqueue("a")               // .queued
/// queue.enqueue("b")               // .queued
/// queue.enqueue("c")               // .droppedOldest("a")
/// queue.dropped                    // 1
/// for message in queue.drain() {   // "b", "c"
///     send(message)
/// }
/// ```
public struct SendQueue<Message> {
    /// What a full queue does with one more message (`queue.overflow`).
    public enum Overflow: String, Sendable, Hashable, CaseIterable {
        /// Throw away the oldest queued message to make room for the new one.
        case dropOldest = "drop_oldest"
        /// Throw away the new message; the queue keeps what it had.
        case dropNewest = "drop_newest"
        /// Refuse the new message, so `c:send` returns `nil, err`.
        case error
    }

    /// What ``enqueue(_:)`` did.
    public enum EnqueueResult {
        /// The message is queued.
        case queued
        /// The message is queued; the oldest one, returned here, was thrown away for it.
        case droppedOldest(Message)
        /// The queue was full: the new message was thrown away (`drop_newest`).
        case droppedNewest
        /// The queue was full: the new message was refused (`error`) and is not counted as
        /// dropped, since the sender is told.
        case full
    }

    /// The most messages the queue holds.
    public let limit: Int
    /// What a full queue does with one more message.
    public let overflow: Overflow
    /// Messages thrown away since the queue was made, by overflow or ``removeAll()``.
    public private(set) var dropped = 0

    // Dequeuing only ever happens all at once (drain) or at the head when dropping the
    // oldest, so a head index over an array gives O(1) drops with occasional compaction.
    private var storage: [Message] = []
    private var head = 0

    /// Creates an empty queue.
    ///
    /// - Parameters:
    ///   - limit: the most messages it holds; 0 means nothing is ever queued.
    ///   - overflow: what a full queue does with one more message.
    public init(limit: Int = 1024, overflow: Overflow = .error) {
        precondition(limit >= 0, "a queue limit cannot be negative")
        self.limit = limit
        self.overflow = overflow
    }

    /// Messages waiting (`stats().queued`).
    public var count: Int { self.storage.count - self.head }

    /// True when nothing is waiting.
    public var isEmpty: Bool { self.count == 0 }

    /// Adds a message at the end, applying the overflow rule when the queue is full.
    @discardableResult
    public mutating func enqueue(_ message: Message) -> EnqueueResult {
        guard self.count >= self.limit else {
            self.storage.append(message)
            return .queued
        }
        switch self.overflow {
        case .error:
            return .full
        case .dropNewest:
            self.dropped += 1
            return .droppedNewest
        case .dropOldest:
            self.dropped += 1
            guard self.limit > 0 else { return .droppedNewest }
            let oldest = self.storage[self.head]
            self.head += 1
            self.storage.append(message)
            self.compactIfWorthIt()
            return .droppedOldest(oldest)
        }
    }

    /// Returns every waiting message, oldest first, and empties the queue.
    public mutating func drain() -> [Message] {
        let messages = Array(self.storage[self.head...])
        self.storage.removeAll(keepingCapacity: true)
        self.head = 0
        return messages
    }

    /// Throws away every waiting message, counting them in ``dropped``, and returns how
    /// many there were: the value `c:close()` returns.
    @discardableResult
    public mutating func removeAll() -> Int {
        let removed = self.count
        self.dropped += removed
        self.storage.removeAll(keepingCapacity: true)
        self.head = 0
        return removed
    }

    private mutating func compactIfWorthIt() {
        if self.head >= 64 && self.head * 2 >= self.storage.count {
            self.storage.removeFirst(self.head)
            self.head = 0
        }
    }
}

extension SendQueue: Sendable where Message: Sendable {}
extension SendQueue.EnqueueResult: Sendable where Message: Sendable {}
extension SendQueue.EnqueueResult: Equatable where Message: Equatable {}
