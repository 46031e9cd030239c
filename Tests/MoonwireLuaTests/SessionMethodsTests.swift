import Testing

@testable import MoonwireLua

/// A client's connection (`c:`) and a server's peer (`peer:`) are one kind of session
/// on the Lua side: the methods both have are declared once (`ScriptRuntime.sessionMethods`
/// in Swift, `session_methods` in prelude/sessions.lua) and behave the same.
@Suite struct SessionMethodsTests {
    /// Adding a method for both roles is one declaration: every entry of
    /// `sessionMethods` is a method of `c:` and of `peer:`, named as each role's.
    @Test func aSharedMethodIsDeclaredOnceForBothRoles() throws {
        let shared = ScriptRuntime.sessionMethods.map(\.key)
        #expect(shared.contains("send") && shared.contains("stats"))
        for key in shared {
            #expect(ScriptRuntime.connectionMethods.list.filter { $0.key == key }.count == 1, "c:\(key)")
            #expect(ScriptRuntime.peerMethods.list.filter { $0.key == key }.count == 1, "peer:\(key)")
        }
        let harness = ScriptHarness()
        try harness.run("""
            missing = {}
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            local c = mw.connect(s:url(), { reconnect = false })
            s:on_connect(function(peer)
              for _, name in ipairs { "send", "ping", "close", "stats", "on_drain", "drain" } do
                if type(c[name]) ~= "function" then missing[#missing + 1] = "c:" .. name end
                if type(peer[name]) ~= "function" then missing[#missing + 1] = "peer:" .. name end
              end
              -- The prelude's private helpers are not methods of either.
              if c._over_budget ~= nil or peer._over_budget ~= nil then missing[#missing + 1] = "_over_budget shown" end
              peer:close()
            end)
            c:receive(5)
            s:close()
            """)
        #expect(try harness.global("missing").sequence.isEmpty)
    }

    /// stats(), close(), ping() and a decode failure answer the same way for both roles.
    @Test func bothRolesAnswerTheSame() throws {
        let harness = ScriptHarness()
        try harness.run("""
            seen = {}
            local function keys(t)
              local list = {}
              for k in pairs(t) do list[#list + 1] = k end
              table.sort(list)
              return table.concat(list, ",")
            end
            local s = assert(mw.listen("ws://127.0.0.1:0/", { codec = "json" }))
            s:on_message(function(peer, msg)
              seen[#seen + 1] = "peer got " .. mw.json.encode(msg)
              seen[#seen + 1] = "ping " .. tostring(peer:ping("p"))
              local st = peer:stats()
              seen[#seen + 1] = "peer stats " .. keys(st) .. " received " .. st.received
              seen[#seen + 1] = "close " .. math.type(peer:close(4000, "done"))
            end)
            local c = mw.connect(s:url(), { reconnect = false })
            assert(c:wait_open(5))
            c:send("not json")
            c:send('{"a":1}')
            local code = select(2, c:receive(5))
            local st = c:stats()
            st.reconnects, st.connect, st.last_rtt = nil, nil, nil
            seen[#seen + 1] = "c stats " .. keys(st)
            seen[#seen + 1] = "ping after close " .. tostring(select(2, c:ping()))
            s:close()

            local t = assert(mw.listen("tcp://127.0.0.1:0"))
            t:on_connect(function(peer)
              local ok, err = pcall(peer.ping, peer)
              seen[#seen + 1] = tostring(ok) .. " " .. tostring(err):gsub("^.-: peer:ping", "peer:ping")
              peer:close()
            end)
            local tc = mw.connect(t:url(), { reconnect = false })
            tc:receive(5)
            t:close()
            """)
        #expect(try harness.global("seen").sequence.compactMap(\.text) == [
            #"peer got {"a":1}"#,
            "ping true",
            "peer stats auto_replies,buffered,bytes_received,bytes_sent,dropped,queued,received,sent received 2",
            "close integer",
            "c stats auto_replies,buffered,bytes_received,bytes_sent,dropped,queued,received,sent",
            "ping after close not open",
            "false peer:ping: a tcp:// or tls:// connection has no ping",
        ])
        // The peer's message that did not decode was logged with its id, as before.
        #expect(harness.reported.isEmpty)
    }
}
