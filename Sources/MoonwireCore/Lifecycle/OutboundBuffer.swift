import NIOCore

/// A message on its way out of a connection.
public struct OutboundMessage {
    /// The payload, or the whole frame when ``framed``.
    public var data: ByteBuffer
    /// Text or binary (TCP ignores it).
    public var kind: MessageKind
    /// Already encoded for the wire (a broadcast's shared frame): written as is.
    public var framed: Bool
    /// The payload's size, for the message counters (all of them, for several frames).
    public var payloadSize: Int
    /// How many messages it carries: more than one for small frames that waited together
    /// in one buffer (``OutboundWriter/mergeQueued(bytes:kind:into:)``).
    public var count = 1

    /// A payload to frame on the way out.
    public init(_ data: ByteBuffer, kind: MessageKind) {
        self.data = data
        self.kind = kind
        self.framed = false
        self.payloadSize = data.readableBytes
    }

    /// A frame (or TCP encoding) made once for many peers.
    public init(frame: ByteBuffer, kind: MessageKind, payloadSize: Int) {
        self.data = frame
        self.kind = kind
        self.framed = true
        self.payloadSize = payloadSize
    }

    /// What the message weighs in the byte budget.
    var size: Int { self.data.readableBytes }
}

/// The handler that carries an open connection's messages: what an ``OutboundBuffer``
/// writes to, directly (a concrete handler per case, no call through the connection's
/// owner). One implementation for both roles and both transports.
enum OutboundLink {
    case clientWebSocket(WebSocketHandler<ClientConnection>)
    case serverWebSocket(WebSocketHandler<ServerPeer>)
    case tcp(FramedChannelHandler)

    /// Tells the handler which budget to wake when its channel becomes writable again.
    func attach(_ budget: OutboundBuffer) {
        switch self {
        case .clientWebSocket(let handler): handler.outbound.budget = budget
        case .serverWebSocket(let handler): handler.outbound.budget = budget
        case .tcp(let handler): handler.outbound.budget = budget
        }
    }

    /// The handler's small frames not handed to the channel yet.
    var gatheredBytes: Int {
        switch self {
        case .clientWebSocket(let handler): handler.outbound.gatheredBytes
        case .serverWebSocket(let handler): handler.outbound.gatheredBytes
        case .tcp(let handler): handler.outbound.gatheredBytes
        }
    }

    /// Frames and writes one message, or writes a finished frame as it is.
    @inline(__always)
    func write(_ message: OutboundMessage) throws(UsageError) {
        switch self {
        case .clientWebSocket(let handler):
            if message.framed { try handler.sendFrame(message.data) } else { try handler.send(message.data, kind: message.kind) }
        case .serverWebSocket(let handler):
            if message.framed { try handler.sendFrame(message.data) } else { try handler.send(message.data, kind: message.kind) }
        case .tcp(let handler):
            if message.framed { try handler.writeEncoded(message.data) } else { try handler.send(message.data) }
        }
    }

    /// Frames and writes one message from bytes valid only for the call: a WebSocket frames
    /// them without first copying them into a buffer of their own; TCP's framing encodes
    /// from a copy.
    @inline(__always)
    func write(bytes: UnsafeRawBufferPointer, kind: MessageKind) throws(UsageError) {
        switch self {
        case .clientWebSocket(let handler): try handler.send(bytes: bytes, kind: kind)
        case .serverWebSocket(let handler): try handler.send(bytes: bytes, kind: kind)
        case .tcp(let handler): try handler.send(ByteBuffer(bytes: bytes))
        }
    }

    /// The form in which a message from bytes valid only for the call waits in the queue:
    /// a client's masked, uncompressed frame made now, which stays valid on a later
    /// connection too (the payload's only copy); else a copy of the payload.
    func queuedMessage(bytes: UnsafeRawBufferPointer, kind: MessageKind) -> OutboundMessage {
        guard case .clientWebSocket(let handler) = self, let frame = handler.frame(bytes: bytes, kind: kind) else {
            return OutboundMessage(ByteBuffer(bytes: bytes), kind: kind)
        }
        return OutboundMessage(frame: frame, kind: kind, payloadSize: bytes.count)
    }

    /// Adds a message from bytes valid only for the call to `message`, frames made by
    /// ``queuedMessage(bytes:kind:)`` still waiting at the end of the queue, so that small
    /// messages wait (and later go out) in one buffer. False when it cannot: the message
    /// then waits on its own.
    func mergeQueued(bytes: UnsafeRawBufferPointer, kind: MessageKind, into message: inout OutboundMessage) -> Bool {
        guard message.framed, case .clientWebSocket(let handler) = self,
            handler.appendFrame(bytes: bytes, kind: kind, to: &message.data)
        else { return false }
        message.payloadSize += bytes.count
        message.count += 1
        return true
    }
}

/// What an ``OutboundBuffer`` tells the connection (client or server peer) it budgets
/// for. None of it is on the way of a message: the buffer writes to the ``OutboundLink``.
protocol OutboundWriter: AnyObject {
    /// The buffer wrote `messages` messages of `payloadBytes` payload bytes in all from its
    /// queue (the message counters, the heartbeat's idea of when we last sent). A message
    /// that ``OutboundBuffer/offer(_:direct:)`` answers `.sent` for is the caller's to count.
    func outboundWrote(messages: Int, payloadBytes: Int)
    /// The link refused a message: is the transport still open (then the message cannot be
    /// carried and is dropped), or going down (then it waits for the next open)?
    var outboundTransportIsOpen: Bool { get }
    /// `buffered` fell back under half the byte budget after the budget was reached
    /// (`on_drain`, and what `drain()` waits for).
    func outboundDrained()
    /// The budget turned a message away (refused or dropped) for the first time on this
    /// connection: the one warning the log gets.
    func outboundFirstReachedBudget()
}

/// The outbound budget of one connection (client or server peer, WebSocket or TCP): what
/// the socket cannot take yet waits in a bounded ``SendQueue``, the same queue that holds
/// messages while the connection is down, so order is kept across both cases.
///
/// While a channel is attached and the queue is empty, a message is written straight
/// through. Once the channel stops being writable (its write-buffer water marks, set
/// from the budget, are passed), messages wait in the queue; when the channel becomes
/// writable again, the queue is written out until it is not. The byte bound covers the
/// queue plus what the channel holds, so `buffered` never passes `bytes` by more than one
/// batch of direct writes.
///
/// ``isHeld`` keeps the queue waiting although a channel is attached: between the open
/// and the end of the `on_open` handlers (and, with `ready = "manual"`, until the
/// application says it is ready). It is the only condition on flushing besides
/// writability.
///
/// With a ``SendBudgetPool`` (the process-wide budget), the buffer charges it what it holds,
/// and an offer the pool cannot take is turned away as when the buffer's own budget is
/// full (``refusedByPool`` tells the two apart).
///
/// All methods must be called on the channel's event loop.
public final class OutboundBuffer {
    /// How a write to the link went.
    public enum WriteOutcome: Sendable, Hashable {
        /// The transport took it.
        case written
        /// The transport is open but cannot carry this message (a TCP framing's limits):
        /// it is dropped and counted.
        case unsendable
        /// The transport is not open (going down): the message waits for the next open.
        case down
    }

    /// What ``offer(_:direct:)`` did with a message.
    public enum Offer: Sendable, Hashable {
        /// Handed to the socket.
        case sent
        /// Waiting in the queue (perhaps after older messages were dropped for it).
        case queued
        /// Thrown away by the overflow rule (`drop_newest`), counted in `dropped`.
        case dropped
        /// Refused: the budget is full and the rule is `error` (`nil, "queue full"`).
        case full
        /// Refused: larger than the whole byte budget (`nil, "message too large"`).
        case tooLarge
        /// The transport cannot carry it (a TCP framing's limits): not taken.
        case unsendable
    }

    /// The messages waiting.
    public private(set) var queue: SendQueue<OutboundMessage>
    /// Receives the budget's events; held strongly until the writer, which owns the buffer,
    /// cuts the link (``SessionCore/disown()``).
    var writer: OutboundWriter?
    /// Why the open transport refused the last message it could not carry (a TCP
    /// framing's limits), or nil.
    public private(set) var lastRefusal: String?
    /// Keeps the queue waiting although a channel is attached; releasing it flushes.
    public var isHeld = false {
        didSet { if oldValue && !self.isHeld { self.flush() } }
    }
    /// True from the moment the budget turned a message away until `buffered` fell back
    /// under half of it: `drain()` waits while this holds.
    public private(set) var budgetReached = false
    /// The channel's high water mark: a quarter of the byte budget, at most 1 MiB.
    public let highWater: Int
    /// The process-wide budget this buffer charges, if any.
    public let pool: SendBudgetPool?
    /// The last message turned away (refused or dropped) was turned away by ``pool``, not
    /// by this buffer's own budget: `nil, "queue full (process send budget …)"`.
    public private(set) var refusedByPool = false
    /// Waiting in ``pool``'s waiters, for it to fall under half.
    var poolWaiting = false
    /// This buffer's slot among the pool's holders of channel bytes, or -1.
    var poolSlot = -1
    /// What this buffer charges ``pool``: the queue's bytes plus ``channelCharge``.
    private var pooled = 0
    /// A bound of what the channel holds, for ``pool``: each write adds its size; asking
    /// the channel sets it.
    private var channelCharge = 0

    private var channel: Channel?
    /// The handler of the attached channel: what messages are written to.
    private var link: OutboundLink?
    /// What the channel held when last asked (asking goes through NIO's option lookup,
    /// which costs about as much as framing a small message), kept until this buffer
    /// writes to the channel again: in between, the socket can only take bytes away, so
    /// it is an upper bound for the queue's checks while messages pile up.
    private var channelBufferedSeen: Int?
    private var warned = false
    private var flushing = false
    /// Bytes written straight through since the last flush of ours: flushed every
    /// `highWater` bytes, so that a handler that buffers until a flush (TLS) lets the
    /// channel see them and turn unwritable.
    private var unflushed = 0

    /// Creates an empty buffer with the budget `limit` messages / `bytes` bytes, charging
    /// `pool` (the process-wide budget) when given.
    public init(limit: Int = 1024, bytes: Int = 16 << 20, overflow: SendQueue<OutboundMessage>.Overflow = .error, pool: SendBudgetPool? = nil) {
        self.queue = SendQueue(limit: limit, bytes: bytes, overflow: overflow)
        self.highWater = max(1, min(bytes / 4, 1 << 20))
        self.pool = pool
    }

    deinit {
        guard let pool = self.pool else { return }
        pool.add(-self.pooled)
        if self.poolSlot >= 0 { pool.release(slot: self.poolSlot) }
    }

    /// Messages waiting (`stats().queued`).
    public var queued: Int { self.queue.count }

    /// Messages dropped, by overflow, a close or a transport that could not carry them.
    public var dropped: Int { self.queue.dropped }

    /// Bytes the channel holds that the socket has not taken yet.
    public var channelBuffered: Int {
        guard let channel = self.channel, let bytes = try? channel.syncOptions?.getOption(.bufferedWritableBytes) else {
            self.chargeChannel(0)
            return 0
        }
        self.channelBufferedSeen = bytes
        self.chargeChannel(bytes + (self.link?.gatheredBytes ?? 0))
        return bytes
    }

    /// ``channelBuffered``, or a bound of it that is at least as large.
    private var channelBufferedAtMost: Int { self.channelBufferedSeen ?? self.channelBuffered }

    /// Bytes waiting (`stats().buffered`): the queue plus what the socket has not taken.
    public var buffered: Int { self.queue.bytes + self.channelBuffered }

    // MARK: Channel

    /// The transport opened on `channel`, whose messages `link` carries: set its water
    /// marks; the link's handler tells this buffer when the channel becomes writable again
    /// (``channelBecameWritable(_:)``). Queued messages wait until ``isHeld`` is false (the
    /// caller sets it).
    func attach(_ channel: Channel, link: OutboundLink) {
        self.channel = channel
        self.link = link
        self.channelBufferedSeen = nil
        self.unflushed = 0
        let marks = ChannelOptions.Types.WriteBufferWaterMark(low: max(1, self.highWater / 2), high: self.highWater)
        try? channel.syncOptions?.setOption(.writeBufferWaterMark, value: marks)
        link.attach(self)
    }

    /// `channel` became writable again: what waited goes out (when it is still this
    /// buffer's channel: a handler of an earlier connection may still hold the buffer).
    func channelBecameWritable(_ channel: Channel) {
        guard self.channel === channel else { return }
        self.flush()
    }

    /// The transport went down: messages wait in the queue for the next ``attach(_:)``.
    public func detach() {
        self.channel = nil
        self.link = nil
        self.channelBufferedSeen = nil
        self.unflushed = 0
        self.chargeChannel(0)
    }

    // MARK: Sending

    /// Sends `message` now if the socket can take it, else queues it within the budget.
    /// With `direct`, it is written at once even ahead of the queue or while held (what
    /// `on_open` sends goes before what was queued); it still must fit the byte budget.
    /// The caller counts a message answered `.sent` (the writer hears only of what the
    /// queue wrote): no call back up per message.
    public func offer(_ message: OutboundMessage, direct: Bool = false) -> Offer {
        self.offer(
            size: message.size, direct: direct,
            write: { link throws(UsageError) in try link.write(message) },
            message: { _ in message }, merge: { _, _ in false }
        )
    }

    /// Like ``offer(_:direct:)`` for bytes valid only for the call (a Lua string's): written
    /// straight from them when the socket can take the message now; copied into a buffer
    /// of their own only when it has to wait in the queue, or added to the frames of the
    /// small messages waiting last (one buffer for many, as the direct path gathers them).
    public func offer(bytes: UnsafeRawBufferPointer, kind: MessageKind, direct: Bool = false) -> Offer {
        self.offer(
            size: bytes.count,
            direct: direct,
            write: { link throws(UsageError) in try link.write(bytes: bytes, kind: kind) },
            message: { link in link?.queuedMessage(bytes: bytes, kind: kind) ?? OutboundMessage(ByteBuffer(bytes: bytes), kind: kind) },
            merge: { link, last in link?.mergeQueued(bytes: bytes, kind: kind, into: &last) ?? false }
        )
    }

    private func offer(
        size: Int, direct: Bool, write: (OutboundLink) throws(UsageError) -> Void,
        message: (OutboundLink?) -> OutboundMessage, merge: (OutboundLink?, inout OutboundMessage) -> Bool
    ) -> Offer {
        if self.lastRefusal != nil { self.lastRefusal = nil }
        self.refusedByPool = false
        guard size <= self.queue.byteLimit else { return .tooLarge }
        if let pool = self.pool, pool.budget > 0, size > pool.budget {
            self.refusedByPool = true
            return .tooLarge
        }
        let poolFits = self.pool?.fits(size) ?? true
        if let channel = self.channel, let link = self.link {
            // A message that could pass the budget on top of what the channel holds (only a
            // large one can) goes through the queue, which counts both; so does one the pool
            // cannot take, for the overflow rule.
            let straight = direct || (poolFits && !self.isHeld && self.queue.isEmpty && channel.isWritable
                && (size + self.highWater <= self.queue.byteLimit || size + self.channelBuffered <= self.queue.byteLimit))
            if straight {
                if direct && self.buffered + size > self.queue.byteLimit {
                    self.reached()
                    return .full
                }
                if direct && !poolFits {
                    self.reachedPool()
                    return .full
                }
                switch self.outcome(of: { () throws(UsageError) in try write(link) }) {
                case .written:
                    self.channelBufferedSeen = nil
                    self.chargeWritten(size)
                    self.unflushed += size
                    if self.unflushed >= self.highWater {
                        self.unflushed = 0
                        channel.flush()
                    }
                    return .sent
                case .unsendable:
                    // The sender is told (not counted as dropped, like a refusal).
                    return .unsendable
                case .down:
                    break
                }
            }
        }
        // The bound saves asking the channel for every message while they pile up; only
        // when the message does not fit by it is the channel asked.
        var elsewhere = self.channelBufferedAtMost
        if !self.queue.fits(size: size, alsoBuffered: elsewhere) { elsewhere = self.channelBuffered }
        // The pool's room as more bytes held elsewhere, so that the queue's rule (and
        // drop_oldest's making room) applies to whichever budget is tighter.
        let ownFits = self.queue.fits(size: size, alsoBuffered: elsewhere)
        var bound = elsewhere
        if !poolFits, let pool = self.pool {
            let queueRoom = pool.budget - (pool.used - self.queue.bytes)
            bound = max(elsewhere, self.queue.byteLimit - queueRoom)
        }
        // The closures get the link as an argument: capturing `self` would retain this buffer per message.
        let link = self.link
        let merged = self.queue.mergeIntoLast(size: size, alsoBuffered: bound) { merge(link, &$0) }
        let result = merged ? .queued : self.queue.enqueue(message(link), size: size, alsoBuffered: bound)
        self.recharge()
        switch result {
        case .queued:
            if self.channel?.isWritable == true { self.flush() }
            return .queued
        case .droppedOldest:
            self.turnedAway(byPool: ownFits)
            return .queued
        case .droppedNewest:
            self.turnedAway(byPool: ownFits)
            return .dropped
        case .full:
            self.turnedAway(byPool: ownFits)
            return .full
        case .tooLarge:
            return .tooLarge
        }
    }

    /// Writes the queue out while the channel is writable and nothing holds it; then
    /// checks whether the budget drained. Called when the channel becomes writable again,
    /// and by the owner after the open (``isHeld`` released).
    public func flush() {
        guard let channel = self.channel, let link = self.link, !self.isHeld, !self.flushing else { return }
        self.flushing = true
        defer { self.flushing = false }
        var wrote = (messages: 0, payloadBytes: 0)
        defer { if wrote.messages > 0 { self.writer?.outboundWrote(messages: wrote.messages, payloadBytes: wrote.payloadBytes) } }
        flushing: while !self.queue.isEmpty && channel.isWritable && self.channel === channel {
            var batch = 0
            while batch < self.highWater, let item = self.queue.popFirstItem() {
                switch self.outcome(of: { () throws(UsageError) in try link.write(item.message) }) {
                case .written:
                    self.channelBufferedSeen = nil
                    self.channelCharge += item.size
                    batch += item.size
                    wrote.messages += item.message.count
                    wrote.payloadBytes += item.message.payloadSize
                case .unsendable:
                    self.queue.countDropped(item.count)
                case .down:
                    self.queue.putBack([item])
                    channel.flush()
                    break flushing
                }
            }
            channel.flush()
        }
        self.unflushed = 0
        self.recharge()
        self.checkDrained()
    }

    /// How a write to the link went: written, or refused by a transport that is open (a
    /// message it cannot carry, whose reason is kept in ``lastRefusal``) or going down.
    @inline(__always)
    private func outcome(of write: () throws(UsageError) -> Void) -> WriteOutcome {
        do {
            try write()
            return .written
        } catch where self.writer?.outboundTransportIsOpen ?? false {
            self.lastRefusal = error.description
            return .unsendable
        } catch {
            return .down
        }
    }

    /// Counts a message the owner could not offer (a broadcast a full peer missed).
    public func countDropped(_ n: Int) {
        self.queue.countDropped(n)
    }

    /// `c:close()`: throws the queue away (counted in `dropped`) and returns how many
    /// messages it held. What the channel already took still goes out.
    @discardableResult
    public func dropQueue() -> Int {
        defer { self.recharge() }
        return self.queue.removeAll()
    }

    private func turnedAway(byPool: Bool) {
        if byPool { self.reachedPool() } else { self.reached() }
    }

    private func reached() {
        self.budgetReached = true
        if !self.warned {
            self.warned = true
            self.writer?.outboundFirstReachedBudget()
        }
    }

    /// The pool turned a message away: `drain` waits for the pool too (its warning is the
    /// pool's, once for all buffers).
    private func reachedPool() {
        self.budgetReached = true
        self.refusedByPool = true
        self.pool?.turnedAway(self)
    }

    private func checkDrained() {
        guard self.budgetReached, !self.poolWaiting, self.buffered < self.queue.byteLimit / 2,
            self.queue.count <= self.queue.limit / 2
        else { return }
        self.budgetReached = false
        self.writer?.outboundDrained()
    }

    // MARK: The pool

    /// The pool fell under half since it turned a message of this buffer away.
    func poolDrained() {
        self.poolWaiting = false
        self.checkDrained()
    }

    /// The pool asks what the channel holds now (``channelBuffered`` charges it).
    func sampleChannelForPool() {
        _ = self.channelBuffered
    }

    /// A write put `size` bytes in the channel.
    @inline(__always)
    private func chargeWritten(_ size: Int) {
        guard let pool = self.pool else { return }
        self.channelCharge += size
        pool.wrote(size)
        self.recharge()
    }

    /// The channel was asked: it holds `bytes` (with the handler's gathered frames).
    private func chargeChannel(_ bytes: Int) {
        guard self.pool != nil else { return }
        self.channelCharge = bytes
        self.recharge()
    }

    /// Brings what this buffer charges the pool to the queue's bytes plus the channel's bound.
    @inline(__always)
    private func recharge() {
        guard let pool = self.pool else { return }
        let now = self.queue.bytes + self.channelCharge
        if now != self.pooled {
            pool.add(now - self.pooled)
            self.pooled = now
        }
        if self.channelCharge > 0 {
            if self.poolSlot < 0 { pool.hold(self) }
        } else if self.poolSlot >= 0 {
            let slot = self.poolSlot
            self.poolSlot = -1
            pool.release(slot: slot)
        }
    }
}
