import Foundation
import Testing

/// `ready = "manual"`: messages held for `c:ready()` are never dropped in silence.
@Suite(.timeLimit(.minutes(5))) struct ManualReadyTests {
    static let script = """
        local s = assert(mw.listen("ws://127.0.0.1:0/"))
        local got = {}
        s:on_message(function(peer, msg)
          got[#got + 1] = msg
          peer:send("got " .. table.concat(got, ","))
        end)
        local held = mw.connect(s:url(), { ready = "manual", reconnect = false })
        held:send("a") held:send("b") held:send("c")
        assert(held:wait_open(5))
        print("close dropped", held:close())
        local released = mw.connect(s:url(), { ready = "manual", reconnect = false })
        released:send("x") released:send("y")
        assert(released:wait_open(5))
        released:ready()
        print(released:request("z", "^got x,y,z$", 5))
        released:close()
        s:close()
        """

    /// Closing with held messages warns once, naming the connection and the count; a
    /// connection that released its queue does not, and -vv logs the release.
    @Test func closingWithHeldMessagesWarnsAndTheReleaseIsLoggedAtTrace() throws {
        let path = try CommandRunner.script("held.lua", Self.script)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "close dropped\t3\ngot x,y,z\ttext\n")
        let warnings = r.stderr.split(separator: "\n").filter { $0.contains("held for c:ready()") }
        #expect(warnings.count == 1, "\(r.stderr)")
        #expect(warnings.first?.contains("connection to ws://127.0.0.1:") == true, "\(r.stderr)")
        #expect(warnings.first?.contains(" closed with 3 messages held for c:ready() (ready = \"manual\"), never sent: dropped") == true, "\(r.stderr)")
        #expect(!r.stderr.contains("releasing"), "\(r.stderr)")

        let traced = try CommandRunner.run("run", "-vv", path)
        #expect(traced.status == 0, "\(traced.stderr)")
        let release = traced.stderr.split(separator: "\n").filter { $0.contains("ready: releasing") }
        #expect(release.count == 1, "\(traced.stderr)")
        #expect(release.first?.contains("ready: releasing 2 held messages (ws://127.0.0.1:") == true, "\(traced.stderr)")
    }
}
