#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOPosix

/// Encodes WebSocket frames (RFC 6455 §5.2) for either role: header, mask key (a client's
/// frames only) and payload in one contiguous buffer, so a message costs one allocation,
/// one copy and one write. A server's frames are unmasked, so a broadcast can write the
/// same bytes to every peer.
///
/// ```swift
/// var client = WebSocketFramer(role: .client)
/// let frame = client.frame(.text, payload: ByteBuffer(string: "hi"), allocator: allocator)  // 8 bytes, masked
/// let pong = WebSocketFramer(role: .server).frame(.pong, payload: ping, allocator: allocator)
/// ```
struct WebSocketFramer {
    /// Where a client's mask keys come from; nil for a server.
    private var masks: WebSocketMaskKeys?

    init(role: WebSocketRole) {
        self.masks = role == .client ? WebSocketMaskKeys() : nil
    }

    /// The largest header a frame can have: 2 + 8 (length) + 4 (a client's mask key). A
    /// compressed payload leaves this much room in front of it for ``frameInPlace(_:fin:rsv1:buffer:)``.
    static let maxHeaderSize = 14

    func headerSize(payload: Int) -> Int {
        (payload < 126 ? 2 : payload <= 0xFFFF ? 4 : 10) + (self.masks == nil ? 0 : 4)
    }

    /// A new buffer holding the whole frame for `payload`.
    mutating func frame(_ opcode: WebSocketFrameOpcode, fin: Bool = true, rsv1: Bool = false, payload: ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer {
        payload.withUnsafeReadableBytes { self.frame(opcode, fin: fin, rsv1: rsv1, payload: $0, allocator: allocator) }
    }

    /// A new buffer holding the whole frame for the bytes at `payload` (a Lua string's):
    /// header and (masked) payload written in one pass, the payload's only copy.
    mutating func frame(
        _ opcode: WebSocketFrameOpcode,
        fin: Bool = true,
        rsv1: Bool = false,
        payload: UnsafeRawBufferPointer,
        allocator: ByteBufferAllocator
    ) -> ByteBuffer {
        var out = allocator.buffer(capacity: self.headerSize(payload: payload.count) + payload.count)
        self.append(opcode, fin: fin, rsv1: rsv1, payload: payload, to: &out)
        return out
    }

    /// A new buffer holding a close frame with `close`'s code and reason, or an empty one
    /// when `close` is nil (the echo of a close frame that carried no code).
    mutating func frame(_ close: WebSocketClose?, allocator: ByteBufferAllocator) -> ByteBuffer {
        guard let close else { return self.frame(.close, payload: ByteBuffer(), allocator: allocator) }
        var payload = allocator.buffer(capacity: 2 + close.reason.utf8.count)
        payload.writeInteger(close.code)
        payload.writeString(close.reason)
        return self.frame(.close, payload: payload, allocator: allocator)
    }

    /// Appends the whole frame for the bytes at `payload` to `out`: header and (masked)
    /// payload in one pass, as ``frame(_:fin:rsv1:payload:allocator:)`` does.
    mutating func append(
        _ opcode: WebSocketFrameOpcode,
        fin: Bool = true,
        rsv1: Bool = false,
        payload: UnsafeRawBufferPointer,
        to out: inout ByteBuffer
    ) {
        let length = payload.count
        let headerSize = self.headerSize(payload: length)
        let key = self.masks?.next()
        out.writeWithUnsafeMutableBytes(minimumWritableBytes: headerSize + length) { dst in
            Self.writeHeader(into: dst, opcode: opcode, fin: fin, rsv1: rsv1, length: length, key: key)
            let body = UnsafeMutableRawBufferPointer(rebasing: dst[headerSize...])
            if let key {
                Self.mask(payload, into: body, key: key)
            } else if length > 0 {
                body.copyMemory(from: payload)
            }
            return headerSize + length
        }
    }

    /// Turns `buffer`'s readable bytes into a frame in place, writing the header into the
    /// free space in front of them (at least ``headerSize(payload:)`` bytes must be there).
    /// Used for freshly compressed payloads, which nobody else holds.
    mutating func frameInPlace(_ opcode: WebSocketFrameOpcode, fin: Bool, rsv1: Bool, buffer: inout ByteBuffer) {
        let length = buffer.readableBytes
        let headerSize = self.headerSize(payload: length)
        precondition(buffer.readerIndex >= headerSize, "no room for the frame header")
        let key = self.masks?.next()
        buffer.moveReaderIndex(to: buffer.readerIndex - headerSize)
        buffer.withUnsafeMutableReadableBytes { all in
            Self.writeHeader(into: all, opcode: opcode, fin: fin, rsv1: rsv1, length: length, key: key)
            if let key {
                let payload = UnsafeMutableRawBufferPointer(rebasing: all[headerSize...])
                Self.mask(UnsafeRawBufferPointer(payload), into: payload, key: key)
            }
        }
    }

    private static func writeHeader(
        into dst: UnsafeMutableRawBufferPointer,
        opcode: WebSocketFrameOpcode,
        fin: Bool,
        rsv1: Bool,
        length: Int,
        key: UInt32?
    ) {
        dst[0] = (fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | opcode.rawValue
        let maskBit: UInt8 = key == nil ? 0 : 0x80
        var i: Int
        if length < 126 {
            dst[1] = maskBit | UInt8(length)
            i = 2
        } else if length <= 0xFFFF {
            dst[1] = maskBit | 126
            dst[2] = UInt8(length >> 8)
            dst[3] = UInt8(length & 0xFF)
            i = 4
        } else {
            dst[1] = maskBit | 127
            for shift in stride(from: 56, through: 0, by: -8) {
                dst[2 + (56 - shift) / 8] = UInt8((UInt64(length) >> UInt64(shift)) & 0xFF)
            }
            i = 10
        }
        guard let key else { return }
        withUnsafeBytes(of: key) { keyBytes in
            for k in 0..<4 { dst[i + k] = keyBytes[k] }
        }
    }

    /// XORs `src` with the repeating 4-byte `key` (in memory order) into `dst`, which may
    /// be the same memory. Works a machine word at a time.
    static func mask(_ src: UnsafeRawBufferPointer, into dst: UnsafeMutableRawBufferPointer, key: UInt32) {
        let count = src.count
        guard count > 0, let s = src.baseAddress, let d = dst.baseAddress else { return }
        // The key's bytes in memory order, twice, viewed as a native word.
        let wide = UInt64(key) | UInt64(key) << 32
        var i = 0
        // 32 bytes per step in vector registers.
        let wideVector = SIMD4<UInt64>(repeating: wide)
        while i + 32 <= count {
            let block = s.loadUnaligned(fromByteOffset: i, as: SIMD4<UInt64>.self)
            d.storeBytes(of: block ^ wideVector, toByteOffset: i, as: SIMD4<UInt64>.self)
            i += 32
        }
        while i + 8 <= count {
            let word = s.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            d.storeBytes(of: word ^ wide, toByteOffset: i, as: UInt64.self)
            i += 8
        }
        withUnsafeBytes(of: key) { keyBytes in
            while i < count {
                d.storeBytes(of: s.load(fromByteOffset: i, as: UInt8.self) ^ keyBytes[i & 3], toByteOffset: i, as: UInt8.self)
                i += 1
            }
        }
    }
}

/// Masking keys from the system's entropy source (RFC 6455 §5.3 asks for unpredictable
/// keys), read in batches so a key does not cost a system call. One pool per event-loop
/// thread, shared by the connections on it: a pool per connection would cost 4 KiB each.
struct WebSocketMaskKeys {
    // The pool of the thread that framed first: a handler frames on its channel's loop
    // only, so the thread-specific lookup (and its retain) happens once, not per frame.
    private var pool: MaskKeyPool?

    mutating func next() -> UInt32 {
        if let pool = self.pool { return pool.next() }
        let pool = MaskKeyPool.current
        self.pool = pool
        return pool.next()
    }
}

final class MaskKeyPool {
    private static let perThread = ThreadSpecificVariable<MaskKeyPool>()
    private static let batch = 1024
    private var pool = [UInt32](repeating: 0, count: MaskKeyPool.batch)
    private var next_ = MaskKeyPool.batch

    static var current: MaskKeyPool { perThread.currentValue(orMake: MaskKeyPool.init) }

    func next() -> UInt32 {
        if self.next_ == self.pool.count {
            self.refill()
        }
        defer { self.next_ += 1 }
        return self.pool[self.next_]
    }

    private func refill() {
        let filled = self.pool.withUnsafeMutableBytes { bytes -> Bool in
            let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            var done = 0
            while done < bytes.count {
                let n = read(fd, bytes.baseAddress! + done, bytes.count - done)
                if n <= 0 { return false }
                done += n
            }
            return true
        }
        if !filled {
            var rng = SystemRandomNumberGenerator()
            for i in self.pool.indices { self.pool[i] = rng.next() }
        }
        self.next_ = 0
    }
}
