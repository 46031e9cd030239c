import Logging
@testable import MoonwireCore
import NIOCore
import NIOPosix
import Testing

@testable import MoonwireLua

/// The objects of a session hold each other strongly while it is alive (no weak load on
/// the message path); the cycles are cut when it ends. These tests hold every object of a
/// client connection, a server and its peer weakly, run a script over real sockets on
/// loopback to its end, and find all of them gone: nothing is left in a cycle.
@Suite(.timeLimit(.minutes(5))) struct SessionLifetimeTests {
    /// Weak references to what a script's client connection and server are made of.
    final class Probes: MessageServerDelegate, @unchecked Sendable {
        weak var runtime: ScriptRuntime?
        weak var luaConnection: LuaConnection?
        weak var managed: ManagedConnection?
        weak var client: ClientConnection?
        weak var luaServer: LuaServer?
        weak var server: MessageServer?
        weak var peer: ServerPeer?
        var peersSeen = 0
        var messagesSeen = 0

        /// On the loop, after the main chunk ran: the connection and the server it made.
        func take(_ runtime: ScriptRuntime) {
            self.runtime = runtime
            luaConnection = runtime.connections.values.first
            managed = luaConnection?.connection
            client = managed?.transport
            luaServer = runtime.servers.values.first
            server = luaServer?.server
            // Sees the server's events before the script does: the peer, when it connects.
            luaServer?.observer = self
        }

        func server(_ server: MessageServer, didConnect peer: ServerPeer, request: ServerPeerRequest) {
            self.peer = peer
            peersSeen += 1
        }
        func session(_ peer: ServerPeer, didReceive message: ByteBuffer, kind: MessageKind) {
            messagesSeen += 1
        }
        func session(_ peer: ServerPeer, didFail error: ConnectionError) {}
        func session(_ peer: ServerPeer, didClose info: CloseInfo) {}
        func server(_ server: MessageServer, accepting event: AcceptPause) {}
    }

    /// An echo server and a client of it in one script: the client sends two messages,
    /// closes after the second echo, and the server closes once its peer has gone.
    static func script(listen url: String) -> String {
        """
        local s = assert(mw.listen("\(url)"))
        s:on_message(function(peer, msg) peer:send(msg) end)
        s:on_close(function() s:close() end)
        local c = mw.connect(s:url())
        local echoes = 0
        c:on_open(function() c:send("one"); c:send("two") end)
        c:on_message(function(_, msg)
          echoes = echoes + 1
          if echoes == 2 then c:close() end
        end)
        c:on_close(function() done = echoes end)
        """
    }

    @Test(arguments: ["ws://127.0.0.1:0/", "tcp://127.0.0.1:0"])
    func everyObjectOfASessionIsFreedOnceItClosedAndTheScriptEnded(url: String) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let probes = Probes()
        let errors = ErrorBox()
        do {
            let logger = Logger(label: "test") { _ in MoonwireLogHandler(level: .error, format: .text, colors: false) }
            let runtime = ScriptRuntime(
                eventLoop: loop, options: .init(logger: logger, reportError: { errors.messages.append($0) }, limits: .init(callbackTimeout: 0))
            )
            let source = Self.script(listen: url)
            // Both on the loop, in this order: the main chunk runs (making the connection
            // and the server), then the probes are taken, before the connection dials.
            let completion = try loop.submit {
                let completion = runtime.run(source: source, chunkName: "lifetime.lua")
                loop.execute { probes.take(runtime) }
                return completion
            }.wait()
            #expect(try ScriptHarness.bounded(completion, seconds: 30) == 0)
            let done = try ScriptHarness.bounded(loop.submit { () -> LuaValue in
                runtime.lua.getGlobal("done")
                defer { runtime.lua.pop() }
                return try runtime.lua.value(at: -1)
            })
            #expect(done == .integer(2))
        }
        #expect(errors.messages.isEmpty)
        // Whatever the loop still had to run (a channel's last handler removals) has run,
        // and nothing is left but the test's weak references.
        try group.syncShutdownGracefully()
        #expect(probes.peersSeen == 1)
        #expect(probes.messagesSeen == 2)
        #expect(probes.runtime == nil, "the runtime")
        #expect(probes.luaConnection == nil, "the LuaConnection")
        #expect(probes.managed == nil, "the ManagedConnection")
        #expect(probes.client == nil, "the ClientConnection")
        #expect(probes.luaServer == nil, "the LuaServer")
        #expect(probes.server == nil, "the MessageServer")
        #expect(probes.peer == nil, "the ServerPeer")
    }
}
