// libFuzzer entry points for moonwire's parsers (scripts/fuzz.sh builds and runs them).
// One executable serves every target; MOONWIRE_FUZZ_TARGET picks which one gets the input.
// Built only with `MOONWIRE_FUZZ=1 swift build --product moonwire-fuzz
// -Xswiftc -sanitize=fuzzer,address --scratch-path .build-fuzz` (see Package.swift).
import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import LuaCoverage
@testable import MoonwireCore
@testable import MoonwireLua
import CLuaShim
import CMoonJSON
import CMoonPack
import CMoonProto

/// The targets by name; scripts/fuzz.sh lists them with `--list`.
let targets: [String: (ByteBuffer) -> Void] = [
    "ws-client": { WebSocketFuzz.run($0, role: .client, deflate: false) },
    "ws-server": { WebSocketFuzz.run($0, role: .server, deflate: false) },
    "ws-client-deflate": { WebSocketFuzz.run($0, role: .client, deflate: true) },
    "ws-server-deflate": { WebSocketFuzz.run($0, role: .server, deflate: true) },
    "http-request": { HTTPFuzz.request($0) },
    "http-response": { HTTPFuzz.response($0) },
    "tcp-line": { FramingFuzz.run($0, framing: .line(max: 4096)) },
    "tcp-delimiter": { FramingFuzz.delimiter($0) },
    "tcp-fixed": { FramingFuzz.fixed($0) },
    "tcp-length": { FramingFuzz.length($0) },
    "lua-json": { LuaTargets.json.run($0) },
    "lua-msgpack": { LuaTargets.msgpack.run($0) },
    "lua-cbor": { LuaTargets.cbor.run($0) },
    "protobuf": { LuaTargets.protobuf.run($0) },
]

let selected: (ByteBuffer) -> Void = {
    let name = ProcessInfo.processInfo.environment["MOONWIRE_FUZZ_TARGET"] ?? ""
    guard let target = targets[name] else {
        FileHandle.standardError.write(Data("MOONWIRE_FUZZ_TARGET must be one of: \(targets.keys.sorted().joined(separator: " "))\n".utf8))
        exit(2)
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    selected(ByteBuffer(bytes: UnsafeBufferPointer(start: data, count: size)))
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt

/// SwiftPM links an executable's `main` to `<module>_main`, so libFuzzer's own main is
/// not used: this one hands over to libFuzzer's driver.
@_cdecl("moonwire_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return runFuzzerDriver(&argc, &argv) { data, size in fuzzTestOneInput(data, size) }
}

/// Splits the input into reads: the first byte seeds the read sizes, so a frame's header,
/// mask key and payload get cut at every place across runs.
struct Reads: Sequence, IteratorProtocol {
    var rest: ByteBuffer
    var seed: UInt8

    init(_ input: ByteBuffer) {
        var input = input
        self.seed = input.readInteger(as: UInt8.self) ?? 0
        self.rest = input
    }

    mutating func next() -> ByteBuffer? {
        guard self.rest.readableBytes > 0 else { return nil }
        self.seed = self.seed &* 37 &+ 11
        // About half the reads are 1-16 bytes, the others take all that is left.
        let size = self.seed & 0x80 == 0 ? Int(self.seed & 0x0F) + 1 : self.rest.readableBytes
        return self.rest.readSlice(length: Swift.min(size, self.rest.readableBytes))
    }
}

/// Frame parser + message assembler (``WebSocketInbound``), as each role's channel handler
/// drives them: until nil or a violation, then stop (the handler discards the rest).
enum WebSocketFuzz {
    static let maxMessage = 64 * 1024

    static func run(_ input: ByteBuffer, role: WebSocketRole, deflate: Bool) {
        let inflater = deflate ? try! PerMessageDeflate(parameters: PerMessageDeflateParameters()) : nil
        var inbound = WebSocketInbound(role: role, maxMessage: Self.maxMessage, deflate: inflater)
        for var read in Reads(input) {
            do {
                while let action = try inbound.next(&read) {
                    switch action {
                    case .message(let message, let kind):
                        precondition(message.readableBytes <= Self.maxMessage, "message above max_message")
                        if kind == .text { precondition(String(validating: message.readableBytesView, as: UTF8.self) != nil, "invalid UTF-8 delivered") }
                    case .ping(let payload), .pong(let payload):
                        precondition(payload.readableBytes <= 125, "control payload above 125 bytes")
                    case .close(let code, _):
                        if let code { precondition(CloseCode.isValidOnWire(code), "invalid close code delivered") }
                    case .none:
                        break
                    }
                }
            } catch {
                precondition([1002, 1007, 1009].contains(error.code), "unexpected close code \(error.code)")
                return
            }
        }
    }
}

/// The upgrade handshake through the same handlers the server and client put in the pipeline.
enum HTTPFuzz {
    static func request(_ input: ByteBuffer) {
        let channel = EmbeddedChannel()
        // The server's bounds (MessageServer): 128 header fields, 80 KiB.
        try! channel.pipeline.syncOperations.addHandler(
            WebSocketServerHandshake(
                server: Upgrades(), deadlines: HandshakeDeadlines(timeout: .seconds(Int64(10)), eventLoop: channel.eventLoop),
                maxHeaders: 128, maxHeaderBytes: 80 * 1024)
        )
        Self.feed(channel, input)
    }

    /// The server's decision without a server: every request RFC 6455 allows is upgraded,
    /// with permessage-deflate when offered, and its frames go to the server's handler.
    private final class Upgrades: WebSocketUpgradeDelegate {
        func decide(_ request: UpgradeRequest) -> WebSocketServerHandshake.Decision {
            .accept(subprotocol: nil, deflate: PerMessageDeflate.serverAccept(request.headers))
        }

        func upgraded(_ channel: Channel, request: UpgradeRequest, subprotocol: String?, deflate: PerMessageDeflate?, after handshake: WebSocketServerHandshake) throws {}
    }

    static func response(_ input: ByteBuffer) {
        let channel = EmbeddedChannel()
        let upgrader = WebSocketClientUpgrader(protocols: ["chat"], deflateOffer: PerMessageDeflateOffer(), onUpgrade: { _, _, _ in })
        try! channel.pipeline.syncOperations.addHTTPClientHandlers(
            leftOverBytesStrategy: .forwardBytes,
            withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in })
        )
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")
        head.headers.add(name: "Host", value: "127.0.0.1")
        try! channel.pipeline.syncOperations.addHandler(WebSocketHandshakeHandler(request: head) { _ in })
        try? channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        Self.feed(channel, input)
    }

    private static func feed(_ channel: EmbeddedChannel, _ input: ByteBuffer) {
        for read in Reads(input) {
            do {
                try channel.writeInbound(read)
            } catch {
                break
            }
        }
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }
}

/// A Lua target: one Lua state for the whole run, and in it the check function its
/// `load` left on the stack. Each input goes to the check as a string; a broken promise
/// raises, and the error becomes a crash here.
final class LuaCheckTarget {
    let name: String
    let vm = LuaVM()
    let check: LuaReference

    init(_ name: String, load: (LuaState) throws -> Void) {
        self.name = name
        let lua = vm.state
        do {
            try load(lua)
        } catch {
            fatalError("\(name): cannot load the target: \(error)")
        }
        check = lua.reference()
        lua.setTop(0)
        mw_fuzz_lua_coverage(lua.L)
    }

    func run(_ input: ByteBuffer) {
        let lua = vm.state
        lua.push(check)
        input.withUnsafeReadableBytes { lua.push(bytes: $0) }
        do {
            try lua.call(arguments: 1, results: 0)
        } catch {
            fatalError("\(name): \(error)")
        }
        mw_fuzz_lua_end_run(lua.L)
    }
}

enum LuaTargets {
    /// Pushes mw.json as the prelude builds it: the native codec installed over json.lua's module.
    static func pushJSON(_ lua: LuaState) throws {
        mw_pushcfunction(lua.L, mw_json_install)
        try lua.load(source: MoonwireLua.PackageResources.json_lua, chunkName: "@moonwire/json.lua")
        try lua.call(arguments: 0, results: 1)
        try lua.call(arguments: 1, results: 1)
    }

    /// mw.json (the native codec over json.lua's module, as the prelude builds it):
    /// lua_json.lua builds values from the input and checks the round trip, and decodes the
    /// input itself, each call also made with json.lua's codec (a second copy sharing null)
    /// and required to give the same result.
    static let json = LuaCheckTarget("lua-json") { lua in
        try pushJSON(lua)
        try lua.load(source: MoonwireLua.PackageResources.json_lua, chunkName: "@moonwire/json.lua")
        lua.getField("null", table: -2)
        try lua.call(arguments: 1, results: 1)
        try lua.load(source: PackageResources.lua_json_lua, chunkName: "@lua_json.lua")
        mw_insert(lua.L, -3)
        try lua.call(arguments: 2, results: 1)
    }

    static let msgpack = pack("lua-msgpack", module: 1)
    static let cbor = pack("lua-cbor", module: 2)

    /// mw.msgpack (`module` 1) or mw.cbor (2), the results of host.pack_native, as the
    /// prelude builds them over mw.json's markers: lua_pack.lua decodes the input and
    /// checks that what decodes encodes, and that the encoding is a fixed point.
    static func pack(_ name: String, module: Int32) -> LuaCheckTarget {
        LuaCheckTarget(name) { lua in
            mw_pushcfunction(lua.L, mw_pack_install)
            try pushJSON(lua)
            try lua.call(arguments: 1, results: 2)
            if module == 1 { lua.pop() } else { mw_insert(lua.L, -2); lua.pop() }
            try lua.load(source: PackageResources.lua_pack_lua, chunkName: "@lua_pack.lua")
            mw_insert(lua.L, -2)
            try lua.call(arguments: 1, results: 1)
        }
    }

    /// mw.protobuf (the native module under protobuf.lua, as the prelude builds it):
    /// lua_protobuf.lua decodes the input as one of the differential test's message types
    /// and checks the error or the round trip. Run from the repository's root (scripts/fuzz.sh
    /// is), where the corpus .proto files are.
    static let protobuf = LuaCheckTarget("protobuf") { lua in
        try lua.load(source: MoonwireLua.PackageResources.protobuf_lua, chunkName: "@moonwire/protobuf.lua")
        mw_pushcfunction(lua.L, mw_protobuf_open)
        try lua.call(arguments: 0, results: 1)
        try lua.call(arguments: 1, results: 1)
        try lua.load(source: PackageResources.lua_protobuf_lua, chunkName: "@lua_protobuf.lua")
        mw_insert(lua.L, -2)
        let corpus: String = "scripts/protobuf_diff"
        lua.push(corpus)
        try lua.call(arguments: 2, results: 1)
    }
}

/// The TCP framing decoders, limits and shapes taken from the input's second byte.
enum FramingFuzz {
    static func run(_ input: ByteBuffer, framing: TCPFraming) {
        var decoder = framing.makeDecoder()
        let max = Self.max(framing)
        for var read in Reads(input) {
            do {
                while let message = try decoder.decode(&read) {
                    if let max { precondition(message.readableBytes <= max, "message above max") }
                }
            } catch {
                return
            }
        }
    }

    static func delimiter(_ input: ByteBuffer) {
        var input = input
        let shape = input.readInteger(as: UInt8.self) ?? 0
        let delimiter: [UInt8] = shape & 1 == 0 ? [0] : [0x0D, 0x0A, 0x2E]
        Self.run(input, framing: .delimiter(delimiter, max: Int(shape >> 1) + 1))
    }

    static func fixed(_ input: ByteBuffer) {
        var input = input
        let size = Int(input.readInteger(as: UInt8.self) ?? 1) + 1
        Self.run(input, framing: .fixed(size))
    }

    static func length(_ input: ByteBuffer) {
        var input = input
        let shape = input.readInteger(as: UInt8.self) ?? 0
        let bytes = [1, 2, 4, 8][Int(shape & 3)]
        let endian: LengthPrefix.Endian = shape & 4 == 0 ? .big : .little
        let adjust = Int(shape >> 3 & 7) - 4
        let prefix = LengthPrefix(bytes: bytes, endian: endian, adjust: adjust, max: 4096)
        guard (try? prefix.validate()) != nil else { return }
        Self.run(input, framing: .length(prefix))
    }

    private static func max(_ framing: TCPFraming) -> Int? {
        switch framing.mode {
        case let delimited as DelimiterFraming: return delimited.max
        case let fixed as FixedFraming: return fixed.size
        case let prefix as LengthPrefix: return prefix.max
        default: return nil
        }
    }
}
