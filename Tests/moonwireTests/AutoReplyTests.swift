import Foundation
import Testing

/// `auto_reply`: the peer's application-level pings (Socket.IO, graphql-transport-ws,
/// JSON) answered without reaching on_message, on both sides, against a real peer
/// (Python websockets, Peers/probe_peer.py) that checks every answer.
@Suite(.timeLimit(.minutes(5))) struct AutoReplyTests {
    /// The script is the client: the peer pings it, and it echoes everything else.
    @Test func aClientAnswersThePeersPingsAndOnMessageNeverSeesThem() throws {
        let peer = try EchoPeer(script: "probe_peer.py", arguments: ["serve"])
        let r = try CommandRunner.run("run", "examples/auto_reply.lua", peer.url)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            on_message\thello 1
            on_message\thello 2
            on_message\thello 3
            on_message\tverdict: ok (3 pings answered)
            answered 3 pings

            """, "\(r.stderr)")
    }

    /// The script is the server: the same rules answer each peer's pings.
    @Test func aServerAnswersEachPeersPings() throws {
        let server = try Background(["run", "examples/auto_reply.lua", "listen", "ws://127.0.0.1:0/"], waitFor: "listening on ")
        let url = server.word(after: "listening on ")
        let probe = try EchoPeer.runPython("probe_peer.py", ["connect", url])
        #expect(probe.status == 0, "\(probe.output)")
        #expect(probe.output == """
            OK 2 -> 3
            OK {"type":"ping"} -> {"type":"pong"}
            OK {"type": "ping"} -> {"type":"pong"}
            verdict: ok (3 pings answered)

            """)
        #expect(server.waitForExit(seconds: 30) == 0, "\(server.output)")
        #expect(server.output.contains("on_message\thello 3\n"), "\(server.output)")
        #expect(server.output.contains("answered 3 pings\n"), "\(server.output)")
        #expect(!server.output.contains("ping\"}\n"), "a ping reached on_message: \(server.output)")
    }

    /// With `ready = "manual"` the answer goes out past the held queue: a Socket.IO
    /// server may ping before the client's own handshake is done.
    @Test func theAnswerPassesAQueueHeldForReady() throws {
        let script = try CommandRunner.script("auto_reply_held.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            s:on_connect(function(peer) peer:send("2") end)
            local c = mw.connect(s:url(), { ready = "manual", reconnect = false, auto_reply = { match = "2", reply = "3" } })
            c:send("x")
            local got = {}
            s:on_message(function(peer, msg)
              got[#got + 1] = msg
              if msg == "3" then
                c:ready()
              else
                print(table.concat(got, ","), c:stats().auto_replies)
                c:close()
                s:close()
              end
            end)
            """)
        let r = try CommandRunner.run(["run", script], deadline: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "3,x\t1\n", "\(r.stderr)")
    }

    /// A rule with a function can compute the answer (through the codec); a bad
    /// option is an error at the script's line naming the rule.
    @Test func replyFunctionsGoThroughTheCodecAndBadRulesAreNamed() throws {
        let script = try CommandRunner.script("auto_reply_codec.lua", """
            local json = { encode = mw.json.encode, decode = mw.json.decode }
            local s = assert(mw.listen("ws://127.0.0.1:0/", {
              codec = json,
              auto_reply = { match = function(m) return m.op == "ping" end,
                             reply = function(m) return { op = "pong", n = m.n } end },
            }))
            s:on_message(function(peer, m) peer:send({ op = "seen", what = m.op }) end)
            local c = mw.connect(s:url(), { reconnect = false, codec = json })
            c:send({ op = "ping", n = 7 })
            c:send({ op = "hello" })
            local pong, seen = c:receive(5), c:receive(5)
            print(pong.op, pong.n, seen.op, seen.what)
            print("client answered", c:stats().auto_replies, "server answered", s:peers()[1]:stats().auto_replies)
            c:close()
            s:close()
            local ok, err = pcall(mw.connect, "ws://127.0.0.1:9/", { auto_reply = { { match = "2", reply = "3" }, { match = "x" } } })
            print(err)
            """)
        let r = try CommandRunner.run("run", script)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            pong\t7\tseen\thello
            client answered\t0\tserver answered\t1
            \(script):16: bad argument #2 to 'mw.connect' (opts.auto_reply[2].reply: string or function expected, got nil)

            """, "\(r.stderr)")
    }
}
