import Foundation
import Testing

/// The WebSocket examples and `moonwire connect`, against a real peer.
@Suite(.timeLimit(.minutes(5))) struct ConnectionExampleTests {
    @Test func echoClientExample() throws {
        let peer = try EchoPeer()
        let r = try CommandRunner.run("run", "examples/echo_client.lua", peer.url)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "hello 1\nhello 2\nhello 3\nbinary\t42\tmoon\n")
    }

    @Test func jsonBotExample() throws {
        let peer = try EchoPeer()
        let r = try CommandRunner.run("run", "examples/json_bot.lua", peer.url)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "got login\ngot say\nclosed 1000\n")
    }

    @Test func msgpackBotExample() throws {
        let peer = try EchoPeer()
        let r = try CommandRunner.run("run", "examples/msgpack_bot.lua", peer.url)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "got login: id 9223372036854775807, key 4 bytes, 0 tags, note null\ngot say: hi, score -0.0\nclosed 1000\n")
    }

    @Test func cborBotExample() throws {
        let peer = try EchoPeer()
        let r = try CommandRunner.run("run", "examples/cbor_bot.lua", peer.url)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "got reading: sensor 3 bytes, seq -9223372036854775808, tag 1 at 1700000000, 2 values (21.5, NaN), 0 in none\nclosed 1000\n")
    }

    @Test func loadWorkersExampleAgainstARealPeer() throws {
        let peer = try EchoPeer()
        let r = try CommandRunner.run("run", "--workers", "2", "examples/load_workers.lua", peer.url, "3", "20")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.split(separator: "\n").sorted() == (1...2).map { "worker \($0) of 2: 3 connections, 60 round trips" })
    }

    @Test func connectSendsPipedLinesQueuedBeforeOpen() throws {
        let peer = try EchoPeer()
        let r = try CommandRunner.run(["connect", peer.url], input: "one\ntwo\n")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "one\ntwo\n")
    }

    /// As wscat's `-c localhost:8080`: a URL without a scheme is a ws:// one.
    @Test func connectTakesAURLWithoutAScheme() throws {
        let peer = try EchoPeer()
        let r = try CommandRunner.run(["connect", "127.0.0.1:\(peer.port)/"], input: "one\n")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "one\n")
        #expect(r.stderr.contains("connected to ws://127.0.0.1:\(peer.port)/"), "\(r.stderr)")
    }

    @Test func connectExitsOneWhenThePeerClosesAbnormally() throws {
        let peer = try EchoPeer()
        let r = try CommandRunner.run(["connect", peer.url], input: "__close__ 4001 go away\n", closeInput: false)
        #expect(r.status == 1)
        #expect(r.stderr.contains("closed by the peer: 4001 \"go away\""))
    }

    @Test func scriptAPIAgainstARealPeer() throws {
        let peer = try EchoPeer()
        let path = try CommandRunner.script("api.lua", """
            local c = mw.connect(mw.args[1], { protocols = { "chat.v2" }, headers = { ["X-Token"] = "t0k3n" }, reconnect = false })
            assert(c:send("sent while connecting"))
            local opened
            c:on_open(function(c, info) opened = info.protocol end)
            assert(c:wait_open(5))
            print(opened, c:state())
            print(c:receive(2))
            local headers = mw.json.decode(assert(c:request("__headers__", "^{", 2)))
            print(headers["x-token"])
            print(c:receive(0.05))
            local ok, err = pcall(function() local sent = c:send("\\255", "text") return sent end)
            print(ok, err)
            c:send("__close__ 4002 done")
            print(c:receive(2))
            local s = c:stats()
            print(c:state(), s.sent, s.received, s.queued, s.dropped)
            """)
        let r = try CommandRunner.run("run", path, peer.url)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            chat.v2\topen
            sent while connecting\ttext
            t0k3n
            nil\ttimeout
            false\t\(path):11: bad argument #1 to 'c:send' (not valid UTF-8: send it as "binary")
            nil\tclosed
            closed\t3\t2\t0\t0

            """)
    }
}
