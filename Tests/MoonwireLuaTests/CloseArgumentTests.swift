import Testing

@testable import MoonwireLua

/// `c:close` and `peer:close` check their code and reason the same way: a reason
/// over 123 bytes (a close frame's payload is at most 125) is misuse, raised at
/// the caller's line, and nothing is closed.
@Suite(.timeLimit(.minutes(5))) struct CloseArgumentTests {
    @Test func aLongReasonRaisesAndLeavesBothEndsOpen() throws {
        let harness = ScriptHarness()
        try harness.run("""
            local long = string.rep("x", 124)
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            s:on_message(function(peer, msg)
              peer_error = select(2, pcall(peer.close, peer, 1000, long))
              peer:send("still open: " .. msg)
            end)
            local c = mw.connect(s:url(), { reconnect = false })
            assert(c:wait_open(5))
            client_error = select(2, pcall(c.close, c, 1000, long))
            client_state = c:state()
            assert(c:send("hello"))
            answer = c:receive(5)
            client_state_after = c:state()
            c:close(1000, string.rep("x", 123))
            closed_with = select(2, c:receive(5))
            s:close()
            """)
        #expect(try harness.global("client_error").text == "test.lua:9: bad argument #2 to 'c:close' (a close reason is at most 123 bytes)")
        #expect(try harness.global("peer_error").text == "test.lua:4: bad argument #2 to 'peer:close' (a close reason is at most 123 bytes)")
        #expect(try harness.global("client_state").text == "open")
        #expect(try harness.global("answer").text == "still open: hello", "the peer was not closed by its failed close")
        #expect(try harness.global("client_state_after").text == "open")
        #expect(try harness.global("closed_with").text == "closed", "a reason of 123 bytes closes")
    }
}
