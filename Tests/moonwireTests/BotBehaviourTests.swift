import Foundation
import Testing

/// Bots that behave as bots should: they come back after a server restart, find the
/// modules next to them, wait for messages by kind, read protocols that pack several
/// packets into one WebSocket message, and say what their heartbeat does.
@Suite(.timeLimit(.minutes(5))) struct BotBehaviourTests {
    /// A real server (Python websockets) shut down with SIGTERM closes its clients with
    /// `code`, as servers do for a restart, and is started again on the same port: the
    /// bot reconnects and runs its on-open logic (a login) again.
    @Test(arguments: [1000, 1001])
    func botComesBackAfterACleanServerRestart(code: Int) throws {
        let first = try EchoPeer(script: "restart_peer.py", arguments: ["--name", "first", "--close-code", String(code)])
        let port = first.port
        let bot = try CommandRunner.script("restart_bot.lua", """
            local c = mw.connect(mw.args[1], { reconnect = { initial = 0.05, max = 0.2, attempts = 200 } })
            c:on_open(function(c, info)
              print("open " .. info.reconnects)
              c:send("login")
            end)
            c:on_close(function(c, code, reason, info)
              print(("close %d %s by %s will_reconnect=%s"):format(code, reason, info.by, tostring(info.will_reconnect)))
            end)
            c:on_message(function(c, msg)
              print(msg)
              if msg == "second: login" then c:close() end
            end)
            """)
        var second: EchoPeer?
        let r = try CommandRunner.run(["run", bot, first.url], deadline: 60) { out in
            var seen = Data()
            while !String(decoding: seen, as: UTF8.self).contains("first: login\n") {
                let chunk = out.availableData
                if chunk.isEmpty { break }
                seen += chunk
            }
            kill(first.process.processIdentifier, SIGTERM)
            first.process.waitUntilExit()
            second = try? EchoPeer(script: "restart_peer.py", arguments: ["--name", "second", "--port", String(port)])
            return seen
        }
        #expect(second != nil, "the second server did not start on port \(port)")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            open 0
            first: login
            close \(code) restart by peer will_reconnect=true
            open 1
            second: login
            close 1000  by local will_reconnect=false

            """)
        // The first retry line says why the connection went.
        #expect(r.stderr.contains("attempt 1 of 200: closed by the peer: \(code) \"restart\""), "\(r.stderr)")
    }

    /// Codes that mean "do not come back" end the connection, whatever `attempts` says:
    /// 1003 and 1008 always, `stop_codes` on top, 1000 with `on_normal_close = false`.
    @Test func doNotComeBackCodesEndTheConnection() throws {
        let path = try CommandRunner.script("stop_codes.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            s:on_message(function(peer, msg) peer:close(tonumber(msg), "go") end)
            local function try(code, reconnect)
              local c = mw.connect(s:url(), { reconnect = reconnect })
              local result
              c:on_close(function(c, code, reason, info)
                result = result or info.will_reconnect
                if info.will_reconnect then c:close() end
              end)
              c:send(tostring(code))
              while result == nil do mw.sleep(0.01) end
              print(code, result)
            end
            try(1008, { attempts = 5 })
            try(1003, { attempts = 5 })
            try(4001, { attempts = 5, stop_codes = { 4001, 4002 } })
            try(4003, { attempts = 5, stop_codes = { 4001, 4002 } })
            try(1000, { attempts = 5, on_normal_close = false })
            try(1000, { attempts = 5 })
            try(1001, { attempts = 5 })
            local ok, err = pcall(mw.connect, s:url(), { reconnect = { stop_codes = { 999 } } })
            print(err)
            s:close()
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            1008\tfalse
            1003\tfalse
            4001\tfalse
            4003\ttrue
            1000\tfalse
            1000\ttrue
            1001\ttrue
            \(path):21: bad argument #2 to 'mw.connect' (opts.reconnect.stop_codes: close codes are 1000 to 4999, got 999)

            """)
    }

    /// `moonwire run dir/bot.lua` from another folder finds `dir/helper.lua`, and
    /// `--lua-path` adds more places.
    @Test func runFindsModulesNextToTheScript() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("moonwire-require-\(getpid())")
        let bots = root.appendingPathComponent("bots")
        let lib = root.appendingPathComponent("lib")
        try FileManager.default.createDirectory(at: bots, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: lib, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        try "return { name = 'next to the bot' }\n".write(to: bots.appendingPathComponent("helper.lua"), atomically: true, encoding: .utf8)
        try "return { name = 'from --lua-path' }\n".write(to: lib.appendingPathComponent("extra.lua"), atomically: true, encoding: .utf8)
        try """
            print(require("helper").name)
            local ok, extra = pcall(require, "extra")
            print(ok and extra.name or "no extra")
            """.write(to: bots.appendingPathComponent("bot.lua"), atomically: true, encoding: .utf8)
        let plain = try CommandRunner.run(["run", "bots/bot.lua"], directory: root)
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(plain.stdout == "next to the bot\nno extra\n")
        let more = try CommandRunner.run(["run", "--lua-path", "lib/?.lua", "bots/bot.lua"], directory: root)
        #expect(more.status == 0, "\(more.stderr)")
        #expect(more.stdout == "next to the bot\nfrom --lua-path\n")
        let absolute = try CommandRunner.run(["run", "-m", lib.path + "/?.lua", bots.appendingPathComponent("bot.lua").path], directory: URL(fileURLWithPath: "/"))
        #expect(absolute.status == 0, "\(absolute.stderr)")
        #expect(absolute.stdout == "next to the bot\nfrom --lua-path\n")
    }

    /// `c:expect` waits by kind: `{ kind = "binary" }`, or a match function that gets the
    /// kind; an older text message does not satisfy it.
    @Test func expectWaitsForAMessageByKind() throws {
        let path = try CommandRunner.script("expect_kind.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            s:on_connect(function(peer)
              peer:send("caption", "text")
              peer:send("\\1\\2\\3", "binary")
              peer:send("second caption", "text")
              peer:send("\\4\\5", "binary")
            end)
            local c = mw.connect(s:url())
            local msg, kind = c:expect(nil, { kind = "binary", timeout = 5 })
            print(mw.hex(msg), kind)
            msg, kind = c:expect(function(m, k) return k == "binary" end, 5)
            print(mw.hex(msg), kind)
            msg, kind = c:expect("caption", { kind = "text" })
            print(msg, kind)
            print(c:expect("nothing", { timeout = 0.05 }))
            print(pcall(c.expect, c, nil, { kind = "json" }))
            print(pcall(c.expect, c, nil, { kinds = "text" }))
            print(pcall(mw.inspect, c:receive(1)))
            c:close()
            s:close()
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            010203\tbinary
            0405\tbinary
            caption\ttext
            nil\ttimeout
            false\t\(path):16: bad argument #2 to 'c:expect' (opts.kind: "text" or "binary" expected, got "json")
            false\t\(path):17: bad argument #2 to 'c:expect' (unknown option 'opts.kinds'; the options are timeout and kind)
            false\tbad argument #2 to 'mw.inspect' (table expected, got string; c:receive, c:expect and c:request return the message and its kind: mw.inspect((c:expect(...))) keeps the message only)

            """)
    }

    /// MQTT over WebSocket: a `framing` function on a ws:// connection reads the
    /// messages' bytes as one stream, so two packets in one WebSocket message come out
    /// as two, and one packet split over two messages as one; each through the codec.
    @Test func framingFunctionOnAWebSocketConnection() throws {
        let path = try CommandRunner.script("ws_framing.lua", """
            -- A packet: one type byte, one length byte, the body.
            local function packet(t, body) return string.char(t, #body) .. body end
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            s:on_connect(function(peer)
              peer:send(packet(1, "one") .. packet(2, "two"), "binary")   -- two in one
              local three = packet(3, "three")
              peer:send(three:sub(1, 3), "binary")                        -- one in two
              peer:send(three:sub(4), "binary")
            end)
            local c = mw.connect(s:url(), {
              framing = function(buffer)
                if #buffer < 2 then return nil end
                local size = 2 + buffer:byte(2)
                if #buffer < size then return nil end
                return buffer:sub(1, size), size
              end,
              codec = { decode = function(p) return { type = p:byte(1), body = p:sub(3) } end },
            })
            for _ = 1, 3 do
              local p, kind = c:receive(5)
              print(p.type, p.body, kind)
            end
            print(pcall(mw.connect, s:url(), { framing = "line" }))
            c:close()
            s:close()
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            1\tone\tbinary
            2\ttwo\tbinary
            3\tthree\tbinary
            false\t\(path):23: bad argument #2 to 'mw.connect' (opts.framing: on ws:// and wss:// connections framing is a function fn(buffer) -> message, consumed (line, raw and the tables are for tcp:// and tls://))

            """)
    }

    /// A peer that sends more than `max_message` bytes without completing a packet is
    /// closed with 1009, and the script hears why.
    @Test func webSocketFramingIsBounded() throws {
        let path = try CommandRunner.script("ws_framing_bound.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            s:on_connect(function(peer)
              for _ = 1, 4 do peer:send(string.rep("x", 400), "binary") end
            end)
            local c = mw.connect(s:url(), { max_message = 1000, reconnect = false,
              framing = function(buffer) return nil end })
            c:on_error(function(c, err) print(err) end)
            c:on_close(function(c, code, reason) print(code, reason) s:close() end)
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            protocol: 1200 bytes received without a complete message, above max 1000 (closed with 1009)
            1009\tframing error

            """)
    }

    /// `-vv` logs the heartbeat's probes as well as the answers: pings and pongs, and
    /// an application-level probe message.
    @Test func traceLogsHeartbeatProbesBothWays() throws {
        let path = try CommandRunner.script("heartbeat_trace.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            s:on_message(function(peer, msg) if msg == "ping?" then peer:send("pong!") end end)
            local pings = mw.connect(s:url(), { heartbeat = { interval = 0.05, timeout = 1 } })
            local app = mw.connect(s:url(), { heartbeat = { interval = 0.05, timeout = 1, message = "ping?", reply = "^pong!$" } })
            mw.sleep(0.3)
            pings:close()
            app:close()
            s:close()
            """)
        let r = try CommandRunner.run("run", "-vv", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("> ping 20 bytes (heartbeat)"), "\(r.stderr)")
        #expect(r.stderr.contains("< pong 20 bytes"), "\(r.stderr)")
        #expect(r.stderr.contains("> text 5 bytes: ping? (heartbeat)"), "\(r.stderr)")
        #expect(r.stderr.contains("< text 5 bytes: pong!"), "\(r.stderr)")
    }

    /// `connect --auto-reply 2=3` keeps a Socket.IO session (python-socketio, pinging
    /// every 0.3 s) alive; without it the server gives up on its ping, and `connect`
    /// says that is what happened and how to answer it. (A 1 s ping timeout leaves room for a
    /// loaded machine: only the unanswered session waits for it.)
    @Test func connectAnswersTheServersPings() throws {
        let server = try EchoPeer(script: "socketio_server.py", arguments: ["--ping-interval", "0.3", "--ping-timeout", "1"])
        let url = "ws://127.0.0.1:\(server.port)/socket.io/?EIO=4&transport=websocket"
        let answered = try CommandRunner.run(["connect", "--auto-reply", "2=3", "-w", "1.5", url], input: "40\n")
        #expect(answered.status == 0, "\(answered.stderr)")
        #expect(answered.stdout.hasPrefix("0{"), "\(answered.stdout)")
        #expect(answered.stdout.contains("\n40{"), "\(answered.stdout)")
        #expect(!answered.stdout.split(separator: "\n").contains("2"), "\(answered.stdout)")
        #expect(!answered.stderr.contains("closed by the peer"), "\(answered.stderr)")
        let unanswered = try CommandRunner.run(["connect", "-w", "3", url], input: "40\n")
        let said = unanswered.stdout + unanswered.stderr
        #expect(said.contains("closed by the peer: 1000"), "\(said)")
        #expect(said.contains("after its last message \"2\", which was not answered: if that is its ping, answer it with --auto-reply '2=3'"), "\(said)")
        let bad = try CommandRunner.run(["connect", "--auto-reply", "23", url])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--auto-reply '23' has no MATCH=REPLY; write it as --auto-reply '2=3'"), "\(bad.stderr)")
    }
}
