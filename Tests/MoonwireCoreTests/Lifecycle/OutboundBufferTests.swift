import NIOCore
import NIOEmbedded
import Testing

@testable import MoonwireCore

extension LifecycleTests {
    /// The budget's rules on an embedded channel whose writability the test sets; the
    /// same over real sockets is in moonwireTests/BackpressureTests.
    @Suite struct OutboundBufferTests {
        final class Writer: OutboundWriter {
            var written: [String] = []
            var drained = 0
            var warnings = 0
            var outcome = OutboundBuffer.WriteOutcome.written

            func writeOutbound(_ message: OutboundMessage) -> OutboundBuffer.WriteOutcome {
                if self.outcome == .written { self.written.append(String(buffer: message.data)) }
                return self.outcome
            }
            func outboundDrained() { self.drained += 1 }
            func outboundFirstReachedBudget() { self.warnings += 1 }
        }

        /// Records which path a message took: straight from the caller's bytes, or as a buffer.
        final class BytesWriter: OutboundWriter {
            var written: [String] = []
            var fromBytes = 0

            func writeOutbound(_ message: OutboundMessage) -> OutboundBuffer.WriteOutcome {
                self.written.append(String(buffer: message.data))
                return .written
            }
            func writeOutbound(bytes: UnsafeRawBufferPointer, kind: MessageKind) -> OutboundBuffer.WriteOutcome {
                self.fromBytes += 1
                self.written.append(String(decoding: bytes, as: UTF8.self))
                return .written
            }
            func outboundDrained() {}
            func outboundFirstReachedBudget() {}
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
            let writer = BytesWriter()
            buffer.writer = writer
            buffer.attach(channel)
            #expect(Self.offer("a", to: buffer) == .sent)
            #expect(writer.fromBytes == 1)
            channel.isWritable = false
            #expect(Self.offer("b", to: buffer) == .queued)
            #expect(buffer.offer(Self.message("c")) == .queued)
            #expect(Self.offer("d", to: buffer) == .queued)
            #expect(Self.offer("e", to: buffer) == .full)
            #expect(Self.offer(String(repeating: "x", count: 1001), to: buffer) == .tooLarge)
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            #expect(writer.written == ["a", "b", "c", "d"])
            #expect(writer.fromBytes == 1, "only the message sent at once used the caller's bytes")
        }

        static func message(_ text: String) -> OutboundMessage {
            OutboundMessage(ByteBuffer(string: text), kind: .text)
        }

        @Test func queuesWhileTheSocketIsFullAndFlushesInOrderWhenItDrains() throws {
            let channel = EmbeddedChannel()
            let buffer = OutboundBuffer(limit: 3, bytes: 1000)
            let writer = Writer()
            buffer.writer = writer
            buffer.attach(channel)
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
            #expect(writer.written == ["a", "b", "c", "d"])
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
            buffer.attach(channel)
            #expect(buffer.offer(Self.message("login")) == .queued, "held: waits behind the queue")
            #expect(buffer.offer(Self.message("first"), direct: true) == .sent)
            #expect(writer.written == ["first"])
            buffer.isHeld = false
            #expect(writer.written == ["first", "queued while down", "login"])
        }

        @Test func tooLargeAndDropRulesAndClose() throws {
            let channel = EmbeddedChannel()
            let buffer = OutboundBuffer(limit: 2, bytes: 10, overflow: .dropOldest)
            let writer = Writer()
            buffer.writer = writer
            buffer.attach(channel)
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
            #expect(writer.written.isEmpty)
        }

        @Test func aTransportGoingDownKeepsTheRestQueued() throws {
            let channel = EmbeddedChannel()
            let buffer = OutboundBuffer()
            let writer = Writer()
            buffer.writer = writer
            buffer.attach(channel)
            channel.isWritable = false
            for text in ["a", "b"] { _ = buffer.offer(Self.message(text)) }
            writer.outcome = .down
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            #expect(buffer.queued == 2)
            buffer.detach()
            writer.outcome = .written
            buffer.attach(EmbeddedChannel())
            buffer.flush()
            #expect(writer.written == ["a", "b"])
        }
    }
}
