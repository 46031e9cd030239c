import Testing

@testable import MoonwireLua

/// A codec whose encode returns something other than a string is misuse, blamed on
/// the line that sent, the same way for a connection, a peer and a broadcast (one
/// prelude function encodes for all three).
@Suite(.timeLimit(.minutes(5))) struct CodecEncodeTests {
    @Test func aBadEncodeIsBlamedOnTheSendersLine() throws {
        let harness = ScriptHarness()
        try harness.run("""
            local codec = { encode = function(v) return v.n end, decode = function(s) return s end }
            local s = assert(mw.listen("ws://127.0.0.1:0/", { codec = codec }))
            s:on_message(function(peer, msg)
              peer_error = select(2, pcall(function() peer:send({ n = 1 }) end))
              broadcast_error = select(2, pcall(function() s:broadcast({ n = true }) end))
              peer:send({ n = "back" })
            end)
            local c = mw.connect(s:url(), { codec = codec, reconnect = false })
            assert(c:wait_open(5))
            client_error = select(2, pcall(function() c:send({ n = {} }) end))
            c:send({ n = "hi" })
            answer = c:receive(5)
            c:close()
            s:close()
            """)
        #expect(try harness.global("client_error").text == "test.lua:10: c:send: the codec's encode returned a table, not a string")
        #expect(try harness.global("peer_error").text == "test.lua:4: peer:send: the codec's encode returned a number, not a string")
        #expect(try harness.global("broadcast_error").text == "test.lua:5: s:broadcast: the codec's encode returned a boolean, not a string")
        #expect(try harness.global("answer").text == "back")
    }
}
