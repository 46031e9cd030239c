import Foundation
import Testing

/// codec = "msgpack", "cbor" and a protobuf codec: a message that does not decode takes
/// the JSON codec's path (prelude/connections.lua's decode_failed, servers.lua's log):
/// counted in `errors`, in words to on_error and receive on a connection, logged with
/// the peer's id on a server; never a silent nil. Over real sockets, both ends moonwire.
@Suite struct FormatCodecErrorTests {
    @Test func messagesThatDoNotDecodeAreCountedAndReported() throws {
        let path = try CommandRunner.script("format_codec_errors.lua", """
            mw.protobuf.load("examples/chat.proto")
            -- 0x0a 0x05: one integer and a byte after it (MessagePack, CBOR), a length
            -- past the end (Protocol Buffers): no codec decodes it.
            local BAD = "\\x0a\\x05"
            local raw = assert(mw.listen("ws://127.0.0.1:0/"))
            raw:on_message(function(peer) peer:send(BAD, "binary") end)
            local codecs = {
              { "msgpack", "msgpack", mw.msgpack.encode },
              { "cbor", "cbor", mw.cbor.encode },
              { "protobuf", mw.protobuf.codec("chat.Envelope"), function(v) return mw.protobuf.encode("chat.Envelope", v) end },
            }
            for _, case in ipairs(codecs) do
              local name, codec, encode = case[1], case[2], case[3]
              -- A connection: on_error gets the words and the raw bytes, receive nil and the words.
              local c = mw.connect(raw:url(), { reconnect = false, codec = codec })
              local heard
              c:on_error(function(_, err, bytes) heard = ("%s (%d bytes)"):format(err, #bytes) end)
              assert(c:wait_open(10))
              c:send({ id = 1 })
              print(name, c:receive(10))
              print(name, heard)
              c:close()
              -- A server: the message is logged with the peer's id; the next one is served.
              local s = assert(mw.listen("ws://127.0.0.1:0/", { codec = codec }))
              s:on_message(function(peer, msg) peer:send({ id = msg.id + 1 }) end)
              local plain = mw.connect(s:url(), { reconnect = false })
              assert(plain:wait_open(10))
              plain:send(BAD, "binary")
              plain:send(encode({ id = 41 }), "binary")
              local back = plain:receive(10)
              print(name, "server goes on", back == encode({ id = 42 }))
              plain:close()
              s:close()
            end
            mw.exit(0)
            """)
        let r = try CommandRunner.run("run", "--summary", "--threshold", "errors:count == 6", path)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        for expected in [
            "msgpack\tnil\tdecode: value: 1 bytes after the MessagePack value (byte 1)",
            "cbor\tnil\tdecode: value: 1 bytes after the CBOR value (byte 1)",
            "msgpack\tserver goes on\ttrue", "cbor\tserver goes on\ttrue", "protobuf\tserver goes on\ttrue",
            "pass  errors:count == 6  (6)",
        ] {
            #expect(lines.contains(expected), "\(expected) not in\n\(r.stdout)")
        }
        for name in ["msgpack", "cbor", "protobuf"] {
            let received = lines.first { $0.hasPrefix("\(name)\tnil\tdecode: ") }
            #expect(received != nil, "\(name): receive did not say why\n\(r.stdout)")
            let heard = lines.first { $0.hasPrefix("\(name)\tdecode: ") && $0.hasSuffix(" (2 bytes)") }
            #expect(heard != nil, "\(name): on_error did not hear of it\n\(r.stdout)")
        }
        #expect(r.stderr.components(separatedBy: "peer 1: decode: ").count == 4, "each server logs its peer's message\n\(r.stderr)")
        // binary that is not text is logged in hex
        #expect(r.stderr.components(separatedBy: "; the message (2 bytes): hex 0a05\n").count == 4, "\(r.stderr)")
    }
}
