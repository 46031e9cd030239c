import NIOCore

/// The fixed part of a WebSocket frame (RFC 6455 §5.2), as it arrives.
public struct WebSocketFrameHeader: Sendable, Hashable {
    /// Last frame of its message.
    public var fin: Bool
    /// RSV1, used by permessage-deflate to flag a compressed message.
    public var rsv1: Bool
    /// RSV2; no extension we support defines it.
    public var rsv2: Bool
    /// RSV3; no extension we support defines it.
    public var rsv3: Bool
    /// The opcode (one of those RFC 6455 defines: the parser refuses others).
    public var opcode: WebSocketFrameOpcode
    /// Payload length in bytes, already checked against the parser's limit.
    public var length: Int

    /// True for close, ping and pong.
    public var isControl: Bool { self.opcode.isControl }
}

/// A streaming parser of WebSocket frames, for either role.
///
/// Unlike a whole-frame decoder it hands out payload as soon as bytes arrive, so a text
/// message can be validated (and rejected) while it is still streaming in, and a frame
/// that claims a huge length is refused from its header alone: the claimed length is never
/// allocated.
///
/// States: `header` (collecting 2–10 header bytes, possibly across reads: the few bytes of
/// a split header are kept in `partialHeader`) and `payload(remaining)`. Every frame yields
/// one ``Event/header(_:)`` followed by one or more ``Event/payload(_:frameComplete:)``
/// (exactly one, empty, for an empty frame). Payload chunks are slices of the input, never
/// copies, except that a server unmasks each chunk into a fresh buffer as it arrives.
///
/// Checks made here are those that need no message context: masking (a client must
/// receive unmasked frames, a server masked ones), unknown opcodes, control frames that
/// are fragmented or longer than 125 bytes, and lengths above `maxPayload` or with the
/// 64-bit length's top bit set.
public struct WebSocketFrameParser: Sendable {
    /// What the parser found next in the input.
    public enum Event: Sendable, Equatable {
        /// A new frame starts.
        case header(WebSocketFrameHeader)
        /// Some or all of the current frame's payload; `frameComplete` on its last chunk.
        case payload(ByteBuffer, frameComplete: Bool)
    }

    private enum State: Sendable {
        case header
        /// `key` is the frame's mask key already rotated to the next payload byte (memory
        /// order), 0 for an unmasked frame.
        case payload(remaining: Int, key: UInt32)
    }

    private var state: State = .header
    private var partialHeader: ByteBuffer?
    /// Frames longer than this are refused with 1009 as soon as their header is read.
    public var maxPayload: Int
    /// Our end: a server expects masked frames, a client unmasked ones.
    public let role: WebSocketRole

    /// Creates a parser for `role` that refuses frames longer than `maxPayload` bytes.
    public init(maxPayload: Int, role: WebSocketRole = .client) {
        self.maxPayload = maxPayload
        self.role = role
    }

    /// Consumes bytes from `buffer` and returns the next event, or nil when `buffer` holds
    /// no more complete header or payload bytes. Call repeatedly until it returns nil.
    public mutating func next(_ buffer: inout ByteBuffer) throws(WebSocketProtocolViolation) -> Event? {
        switch self.state {
        case .payload(let remaining, let key):
            if remaining == 0 {
                self.state = .header
                return .payload(buffer.readSlice(length: 0)!, frameComplete: true)
            }
            let available = buffer.readableBytes
            guard available > 0 else { return nil }
            let take = min(remaining, available)
            var chunk = buffer.readSlice(length: take)!
            let left = remaining - take
            if self.role == .server {
                chunk = Self.unmask(chunk, key: key)
            }
            // The next chunk starts `take` bytes further into the 4-byte key.
            let shift = UInt32((take & 3) * 8)
            let next = shift == 0 ? key : (key >> shift | key << (32 - shift))
            self.state = left == 0 ? .header : .payload(remaining: left, key: next)
            return .payload(chunk, frameComplete: left == 0)

        case .header:
            guard let (header, key) = try self.readHeader(&buffer) else { return nil }
            self.state = .payload(remaining: header.length, key: key)
            return .header(header)
        }
    }

    /// The chunk XORed with `key` (memory order) into a new buffer, a word at a time.
    /// Little-endian byte order is assumed for the key rotation, as on every platform
    /// Swift runs on.
    static func unmask(_ masked: ByteBuffer, key: UInt32) -> ByteBuffer {
        let count = masked.readableBytes
        var payload = ByteBufferAllocator().buffer(capacity: count)
        payload.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { dst in
            masked.withUnsafeReadableBytes { src in WebSocketFramer.mask(src, into: dst, key: key) }
            return count
        }
        return payload
    }

    private mutating func readHeader(_ buffer: inout ByteBuffer) throws(WebSocketProtocolViolation) -> (WebSocketFrameHeader, UInt32)? {
        if var stash = self.partialHeader {
            // A header split across reads: top the stash up with just enough new bytes.
            let had = stash.readableBytes
            let take = min(self.maxHeaderSize - had, buffer.readableBytes)
            stash.writeImmutableBuffer(buffer.getSlice(at: buffer.readerIndex, length: take)!)
            let parsed = try stash.withUnsafeReadableBytes { bytes throws(WebSocketProtocolViolation) in
                try self.parseHeader(bytes)
            }
            guard let (header, size, key) = parsed else {
                buffer.moveReaderIndex(forwardBy: take)
                self.partialHeader = stash
                return nil
            }
            buffer.moveReaderIndex(forwardBy: size - had)
            self.partialHeader = nil
            return (header, key)
        }
        let parsed = try buffer.withUnsafeReadableBytes { bytes throws(WebSocketProtocolViolation) in
            try self.parseHeader(bytes)
        }
        guard let (header, size, key) = parsed else {
            if buffer.readableBytes > 0 {
                var stash = ByteBuffer()
                stash.reserveCapacity(self.maxHeaderSize)
                stash.writeBuffer(&buffer)
                self.partialHeader = stash
            }
            return nil
        }
        buffer.moveReaderIndex(forwardBy: size)
        return (header, key)
    }

    /// 2 fixed bytes + 8 for a 64-bit length, + 4 for the mask key a server receives (a
    /// client refuses a mask key before it matters).
    private var maxHeaderSize: Int { self.role == .server ? 14 : 10 }

    /// Parses a header at the start of `bytes`: the header, its size and the mask key (0
    /// when unmasked); nil when more bytes are needed.
    private func parseHeader(_ bytes: UnsafeRawBufferPointer) throws(WebSocketProtocolViolation) -> (WebSocketFrameHeader, Int, UInt32)? {
        guard bytes.count >= 2 else { return nil }
        let b0 = bytes[0]
        let b1 = bytes[1]
        guard let opcode = WebSocketFrameOpcode(rawValue: b0 & 0x0F) else {
            throw .protocolError("unknown opcode \(b0 & 0x0F)")
        }
        let masked = b1 & 0x80 != 0
        switch (self.role, masked) {
        case (.client, true): throw .protocolError("masked frame from server")
        case (.server, false): throw .protocolError("unmasked frame from client")
        default: break
        }
        let fin = b0 & 0x80 != 0
        let isControl = opcode.isControl
        if isControl && !fin {
            throw .protocolError("fragmented control frame")
        }
        var length = Int(b1 & 0x7F)
        var size = 2
        if length == 126 {
            guard bytes.count >= 4 else { return nil }
            length = Int(bytes[2]) << 8 | Int(bytes[3])
            size = 4
        } else if length == 127 {
            guard bytes.count >= 10 else { return nil }
            var wide: UInt64 = 0
            for i in 2..<10 { wide = wide << 8 | UInt64(bytes[i]) }
            if wide & (1 << 63) != 0 {
                throw .protocolError("frame length with the most significant bit set")
            }
            guard wide <= UInt64(self.maxPayload) else { throw .tooBig(self.maxPayload) }
            length = Int(wide)
            size = 10
        }
        if isControl && length > WebSocketFrameOpcode.maxControlPayload {
            throw .protocolError("control frame longer than 125 bytes")
        }
        guard length <= self.maxPayload else { throw .tooBig(self.maxPayload) }
        var key: UInt32 = 0
        if masked {
            guard bytes.count >= size + 4 else { return nil }
            key = bytes.loadUnaligned(fromByteOffset: size, as: UInt32.self)
            size += 4
        }
        let header = WebSocketFrameHeader(
            fin: fin,
            rsv1: b0 & 0x40 != 0,
            rsv2: b0 & 0x20 != 0,
            rsv3: b0 & 0x10 != 0,
            opcode: opcode,
            length: length
        )
        return (header, size, key)
    }
}
