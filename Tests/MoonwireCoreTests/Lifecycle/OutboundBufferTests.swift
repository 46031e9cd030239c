import NIOCore
import NIOEmbedded
import Testing

@testable import MoonwireCore

extension LifecycleTests {
    /// The budget's rules on an embedded channel whose writability the test sets; the
    /// same over real sockets is in moonwireTests/BackpressureTests.
    @Suite struct OutboundBufferTests {
        /// The buffer's owner: counts what the buffer says it wrote and its events.
        final class Writer: OutboundWriter, ChannelOwner {
            var wroteMessages = 0
            var wroteBytes = 0
            var drained = 0
            var warnings = 0
            var outboundTransportIsOpen = true

            func outboundWrote(messages: Int, payloadBytes: Int) {
                self.wroteMessages += messages
                self.wroteBytes += payloadBytes
            }
            func outboundDrained() { self.drained += 1 }
            func outboundFirstReachedBudget() { self.warnings += 1 }
            func handlerReceived(_ message: ByteBuffer, kind: MessageKind) {}
            func handlerFailed(_ error: ConnectionError) {}
            func handlerClosed(_ info: CloseInfo) {}
        }

        /// Attaches `buffer` to `channel` through a raw TCP link (each message written as it
        /// is), as a connection does at its open.
        @discardableResult
        static func attach(_ buffer: OutboundBuffer, to channel: EmbeddedChannel, owner: Writer) throws -> FramedChannelHandler {
            let handler = FramedChannelHandler(framing: .raw, closeTimeout: .seconds(5), owner: owner)
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
            buffer.attach(channel, link: .tcp(handler))
            return handler
        }

        /// What reached the channel, one string per write, after the loop's end-of-tick flush.
        static func written(_ channel: EmbeddedChannel) throws -> [String] {
            channel.embeddedEventLoop.run()
            var out: [String] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { out.append(String(buffer: buffer)) }
            return out
        }

        static func offer(_ text: String, to buffer: OutboundBuffer) -> OutboundBuffer.Offer {
            Array(text.utf8).withUnsafeBytes { buffer.offer(bytes: $0, kind: .text) }
        }

        /// A Lua string's bytes are framed from where they are when the socket takes them;
        /// a message that must wait is copied into the queue (the bytes are gone after the
        /// call) and comes out in order with the rest.
        @Test func bytesGoStraightOutOrAreCopiedIntoTheQueue() throws {
            let channel = EmbeddedChannel()
            let buffer = OutboundBuffer(limit: 3, bytes: 1000)
            let writer = Writer()
            buffer.writer = writer
            try Self.attach(buffer, to: channel, owner: writer)
            #expect(Self.offer("a", to: buffer) == .sent)
            #expect(writer.wroteMessages == 0, "the caller counts what was sent at once")
            channel.isWritable = false
            #expect(Self.offer("b", to: buffer) == .queued)
            #expect(buffer.offer(Self.message("c")) == .queued)
            #expect(Self.offer("d", to: buffer) == .queued)
            #expect(Self.offer("e", to: buffer) == .full)
            #expect(Self.offer(String(repeating: "x", count: 1001), to: buffer) == .tooLarge)
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            #expect(try Self.written(channel) == ["a", "b", "c", "d"])
            #expect(writer.wroteMessages == 3 && writer.wroteBytes == 3, "the queue's writes are told; \"a\" is the caller's to count")
        }

        static func message(_ text: String) -> OutboundMessage {
            OutboundMessage(ByteBuffer(string: text), kind: .text)
        }

        @Test func queuesWhileTheSocketIsFullAndFlushesInOrderWhenItDrains() throws {
            let channel = EmbeddedChannel()
            let buffer = OutboundBuffer(limit: 3, bytes: 1000)
            let writer = Writer()
            buffer.writer = writer
            try Self.attach(buffer, to: channel, owner: writer)
            #expect(buffer.offer(Self.message("a")) == .sent)
            channel.isWritable = false
            #expect(buffer.offer(Self.message("b")) == .queued)
            #expect(buffer.offer(Self.message("c")) == .queued)
            #expect(buffer.offer(Self.message("d")) == .queued)
            #expect(buffer.offer(Self.message("e")) == .full)
            #expect(buffer.offer(Self.message("f")) == .full)
            #expect(buffer.queued == 3 && buffer.dropped == 0)
            #expect(buffer.budgetReached)
            #expect(writer.warnings == 1, "warned once")
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            #expect(try Self.written(channel) == ["a", "b", "c", "d"])
            #expect(buffer.queued == 0)
            #expect(writer.drained == 1)
            #expect(!buffer.budgetReached)
        }

        @Test func heldUntilReleasedAndDirectSendsGoFirst() throws {
            let channel = EmbeddedChannel()
            let buffer = OutboundBuffer()
            let writer = Writer()
            buffer.writer = writer
            #expect(buffer.offer(Self.message("queued while down")) == .queued)
            buffer.isHeld = true
            try Self.attach(buffer, to: channel, owner: writer)
            #expect(buffer.offer(Self.message("login")) == .queued, "held: waits behind the queue")
            #expect(buffer.offer(Self.message("first"), direct: true) == .sent)
            #expect(try Self.written(channel) == ["first"])
            buffer.isHeld = false
            #expect(try Self.written(channel) == ["queued while down", "login"])
        }

        @Test func tooLargeAndDropRulesAndClose() throws {
            let channel = EmbeddedChannel()
            let buffer = OutboundBuffer(limit: 2, bytes: 10, overflow: .dropOldest)
            let writer = Writer()
            buffer.writer = writer
            try Self.attach(buffer, to: channel, owner: writer)
            #expect(buffer.offer(Self.message(String(repeating: "x", count: 11))) == .tooLarge)
            channel.isWritable = false
            #expect(buffer.offer(Self.message("1")) == .queued)
            #expect(buffer.offer(Self.message("2")) == .queued)
            #expect(buffer.offer(Self.message("3")) == .queued)
            #expect(buffer.dropped == 1)
            #expect(buffer.dropQueue() == 2)
            #expect(buffer.dropped == 3)
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            #expect(try Self.written(channel).isEmpty)
        }

        @Test func aTransportGoingDownKeepsTheRestQueued() throws {
            let channel = EmbeddedChannel()
            let buffer = OutboundBuffer()
            let writer = Writer()
            buffer.writer = writer
            let handler = try Self.attach(buffer, to: channel, owner: writer)
            channel.isWritable = false
            for text in ["a", "b"] { _ = buffer.offer(Self.message(text)) }
            // The handler leaves the pipeline (the transport is going down): it refuses, and
            // the owner says the transport is not open.
            channel.pipeline.syncOperations.removeHandler(handler, promise: nil)
            writer.outboundTransportIsOpen = false
            channel.isWritable = true
            buffer.flush()
            #expect(buffer.queued == 2)
            #expect(buffer.dropped == 0)
            buffer.detach()
            writer.outboundTransportIsOpen = true
            let next = EmbeddedChannel()
            try Self.attach(buffer, to: next, owner: writer)
            buffer.flush()
            #expect(try Self.written(next) == ["a", "b"])
            #expect(try Self.written(channel).isEmpty)
        }
    }
}
