import CompressNIO
import NIOCore

/// The zlib state of one permessage-deflate connection (RFC 7692): a raw-deflate
/// decompressor for what the server sends and a compressor for what we send.
///
/// Inflation is streamed chunk by chunk into the message buffer and stops as soon as the
/// output would pass `maxMessage`, so a small "zip bomb" frame costs at most `maxMessage`
/// bytes of memory.
final class PerMessageDeflate {
    /// The empty stored block a sync flush ends with; senders strip it, receivers add it back.
    private static let tail: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]
    /// Messages this small are sent uncompressed: the frame overhead would eat the gain.
    static let minimumCompressedSize = 32

    let parameters: PerMessageDeflateParameters
    private let inflater: ZlibDecompressor
    private let deflater: ZlibCompressor?

    init(parameters: PerMessageDeflateParameters) throws {
        self.parameters = parameters
        // A 15-bit window decodes anything a smaller window produced.
        self.inflater = try ZlibDecompressor(algorithm: .deflate, windowSize: 15)
        // zlib cannot produce raw deflate with an 8-bit window (it silently uses 9), so with
        // client_max_window_bits=8 every message goes out uncompressed, which RFC 7692 allows.
        if parameters.clientMaxWindowBits >= 9 {
            self.deflater = try ZlibCompressor(
                algorithm: .deflate,
                configuration: ZlibConfiguration(windowSize: Int32(parameters.clientMaxWindowBits))
            )
        } else {
            self.deflater = nil
        }
    }

    /// Inflates `input` (a chunk of a compressed message) onto `output`, whose readable bytes
    /// are the message so far. Throws 1009 once the message passes `maxMessage` and 1007 on
    /// corrupt data.
    func inflate(_ input: inout ByteBuffer, into output: inout ByteBuffer, maxMessage: Int) throws(WebSocketProtocolViolation) {
        // zlib may hold back output when the buffer fills, so after an overflow it is called
        // again (even with no input left) until it reports it has nothing more to give.
        var more = input.readableBytes > 0
        while more {
            // One spare byte tells "exactly maxMessage" apart from "more than maxMessage".
            let room = maxMessage + 1 - output.readableBytes
            if room <= 0 { throw .tooBig(maxMessage) }
            if output.writableBytes == 0 {
                let grow = min(max(output.capacity, input.readableBytes * 4, 4096), room)
                output.reserveCapacity(minimumWritableBytes: grow)
            }
            do {
                try self.inflater.inflate(from: &input, to: &output)
                more = input.readableBytes > 0
                if more {
                    // The sender ended a deflate stream (BFINAL) inside the message; what
                    // follows starts a new one.
                    try? self.inflater.reset()
                }
            } catch let error as CompressNIOError {
                switch error {
                case .bufferOverflow:
                    more = true
                case .inputBufferOverflow:
                    more = false
                default:
                    throw .invalidPayload("invalid compressed data")
                }
            } catch {
                throw .invalidPayload("invalid compressed data")
            }
        }
        if output.readableBytes > maxMessage { throw .tooBig(maxMessage) }
    }

    /// Inflates the implicit end-of-message tail and resets the stream if the server does not
    /// keep its context.
    func finishMessage(into output: inout ByteBuffer, maxMessage: Int) throws(WebSocketProtocolViolation) {
        var tail = ByteBuffer(bytes: Self.tail)
        try self.inflate(&tail, into: &output, maxMessage: maxMessage)
        if self.parameters.serverNoContextTakeover {
            try? self.inflater.reset()
        }
    }

    /// False when the agreed window is one zlib cannot honour; everything goes out plain.
    var canCompress: Bool { self.deflater != nil }

    /// True if outbound messages of this size are worth compressing.
    func shouldCompress(_ size: Int) -> Bool {
        self.canCompress && size >= Self.minimumCompressedSize
    }

    /// Compresses one whole message (or one fragment, `isFinal` false) into a fresh buffer
    /// that leaves `headroom` free bytes in front for the frame header.
    func deflate(_ input: ByteBuffer, isFinal: Bool, headroom: Int, allocator: ByteBufferAllocator) throws -> ByteBuffer {
        guard let deflater = self.deflater else { preconditionFailure("deflate without a compressor") }
        var source = input
        var output = allocator.buffer(capacity: headroom + deflater.maxSize(from: source))
        output.moveWriterIndex(forwardBy: headroom)
        output.moveReaderIndex(forwardBy: headroom)
        if source.readableBytes > 0 {
            try deflater.deflate(from: &source, to: &output, flush: .sync)
        } else {
            output.writeBytes(Self.tail)
        }
        if isFinal {
            // A sync flush always ends with the empty stored block; strip it (RFC 7692 §7.2.1).
            output.moveWriterIndex(to: output.writerIndex - Self.tail.count)
            if self.parameters.clientNoContextTakeover {
                try deflater.reset()
            }
        }
        return output
    }
}
