import Foundation
import Testing

/// The scripting API over real sockets: heartbeat replies, message kinds, expect,
/// errors in words and the connection log (issue 15).
@Suite(.timeLimit(.minutes(5))) struct ScriptingAPITests {
    /// Closing the script's last connection to a server outside it (TCP closes before
    /// `c:close()` returns) does not end the script while its main chunk goes on: the
    /// `mw.sleep` after it still wakes.
    @Test func aScriptGoesOnAfterClosingItsLastTCPConnection() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ready = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && listen(fd, 8) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        #expect(ready)
        // The kernel completes the handshake into the backlog: no accept needed.
        let script = try CommandRunner.script("close_then_sleep.lua", """
            local c = mw.connect("tcp://127.0.0.1:\(UInt16(bigEndian: address.sin_port))")
            assert(c:wait_open(5))
            c:close()
            print("closed")
            mw.sleep(0.05)
            print("woke")
            """)
        let r = try CommandRunner.run("run", script)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "closed\nwoke\n")
    }

    @Test func heartbeatRepliesNeverReachTheScript() throws {
        let peer = try EchoPeer()
        let r = try CommandRunner.run("run", "examples/heartbeat_bot.lua", peer.url)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "data\t1\tnil\ttimeout\nheartbeat replies seen by on_message:\t0\trtt measured:\ttrue\n")
    }

    @Test func heartbeatReplyPatternAndKindAreCheckedAtConnect() throws {
        let path = try CommandRunner.script("hbopts.lua", """
            local function try(opts)
              local ok, err = pcall(function() local c = mw.connect("ws://127.0.0.1:1/", opts) c:close() end)
              print(err)
            end
            try({ heartbeat = { message = "ping", reply = "100%" } })
            try({ heartbeat = { message = "ping", reply = 42 } })
            try({ heartbeat = { message = "ping", kind = "bin" } })
            try({ kind = "utf8" })
            try({ heartbeat = { intervall = 1 } })
            try({ reconnect = { factor = 0.5 } })
            try({ queue = { limit = "x" } })
            local c = mw.connect("ws://127.0.0.1:1/", { reconnect = false })
            print(select(2, pcall(function() c:heartbeat({ intervl = 1 }) end)))
            print(select(2, pcall(function() c:reconnect({ factor = 0 }) end)))
            c:close()
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            print(select(2, pcall(function() local s2 = mw.listen("ws://127.0.0.1:0/", { heartbeat = { interval = 1, message = "x" } }) end)))
            s:close()
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            \(path):2: bad argument #2 to 'mw.connect' (opts.heartbeat.reply: bad Lua pattern "100%": malformed pattern (ends with '%'))
            \(path):2: bad argument #2 to 'mw.connect' (opts.heartbeat.reply: Lua pattern or function expected, got number)
            \(path):2: bad argument #2 to 'mw.connect' (opts.heartbeat.kind: "text" or "binary" expected, got "bin")
            \(path):2: bad argument #2 to 'mw.connect' (opts.kind: "auto", "text" or "binary" expected, got "utf8")
            \(path):2: bad argument #2 to 'mw.connect' (unknown option 'opts.heartbeat.intervall')
            \(path):2: bad argument #2 to 'mw.connect' (opts.reconnect.factor: must be a number of at least 1)
            \(path):2: bad argument #2 to 'mw.connect' (opts.queue.limit: a positive number expected, got string)
            \(path):13: bad argument #1 to 'c:heartbeat' (unknown option 'opts.intervl')
            \(path):14: bad argument #1 to 'c:reconnect' (opts.factor: must be a number of at least 1)
            \(path):17: bad argument #2 to 'mw.listen' (opts.heartbeat.message: a server's heartbeat has no message: it pings WebSocket peers and drops silent ones)

            """)
    }

    /// A `reply`-less message heartbeat is answered by any message: the next probe is due
    /// an interval after the answer, not at the probe's timeout. With a 0.3 s interval and a
    /// 60 s timeout, five probes arrive in about 1.5 s; probes paced by the timeout would
    /// take four minutes. The script waits for the fifth by count, with 30 s to spare for a
    /// loaded machine: no window of seconds is asserted.
    @Test func messageHeartbeatAnsweredByAnyMessageKeepsItsInterval() throws {
        let path = try CommandRunner.script("hbcadence.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            local probes = 0
            local c, give_up
            s:on_message(function(peer, msg)
              probes = probes + 1
              peer:send(msg)
              if probes == 5 then print("probes", probes) give_up:cancel() c:close() s:close() end
            end)
            c = mw.connect(s:url(), { reconnect = false, heartbeat = { interval = 0.3, timeout = 60, message = "hb" } })
            give_up = mw.after(30, function() print("probes", probes) mw.exit(1) end)
            """)
        let r = try CommandRunner.run(["run", path], deadline: 60)
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout == "probes\t5\n", "\(r.stdout)")
    }

    @Test func listenHeartbeatIntervalDropsASilentTCPPeer() throws {
        let path = try CommandRunner.script("listenhb.lua", """
            local s = assert(mw.listen("tcp://127.0.0.1:0", { heartbeat = { interval = 0.1, timeout = 0.1 } }))
            local c = mw.connect(s:url(), { reconnect = false })
            c:on_close(function(_, code, reason, info) print("dropped", info.by) s:close() end)
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("dropped\t"), "\(r.stdout)")
    }

    @Test func kindOptionAndExpect() throws {
        let peer = try EchoPeer()
        let path = try CommandRunner.script("kind.lua", """
            local bin = mw.connect(mw.args[1], { reconnect = false, kind = "binary" })
            assert(bin:wait_open(10))
            bin:send("hello")
            print(bin:receive(10))
            bin:send("text after all", "text")
            print(bin:receive(10))
            bin:close()

            local c = mw.connect(mw.args[1], { reconnect = false, codec = { encode = mw.json.encode, decode = mw.json.decode } })
            for _, op in ipairs({ "a", "b", "c" }) do c:send({ op = op, n = 1 }) end
            print(c:expect({ op = "c" }, 10).op)
            print(c:receive(10).op, c:receive(10).op)
            print(c:expect({ op = "nope" }, 0.05))
            c:send({ op = "d", nested = { x = 1, y = 2 } })
            print(c:expect(function(m) return m.op == "d" end, 10).nested.y)
            c:send({ op = "e", nested = { x = 1, y = 2 } })
            print(c:expect({ nested = { y = 2 } }, 10).op)
            print(pcall(function() local m = c:expect(42) end))
            c:close()
            """)
        let r = try CommandRunner.run("run", path, peer.url)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            hello\tbinary
            text after all\ttext
            c
            a\tb
            nil\ttimeout
            2
            e
            false\t\(path):18: bad argument #1 to 'c:expect' (function, Lua pattern or table expected, got number)

            """)
    }

    /// codec = "json" on both ends: values decoded from the frames (64-bit integers, floats,
    /// empty arrays intact) and tables encoded into them; a message that is not JSON is an
    /// error in words with the raw message (on_error, or the log), receive's nil,
    /// "decode: ...", never a silent nil.
    /// auto_reply with codec = "json": exact rules match the bytes before decoding, rules
    /// with a function match the decoded value; a string match with a function reply has
    /// no bytes to compare in Lua, so it is refused at connect, in words.
    @Test func autoReplyWithTheJSONCodec() throws {
        let path = try CommandRunner.script("auto_reply_json.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/", { codec = "json" }))
            local answers = {}
            s:on_connect(function(peer)
              peer:send({ type = "ping", id = 7 })
              peer:send({ type = "hello" })
            end)
            s:on_message(function(peer, msg) answers[#answers + 1] = mw.json.encode(msg, { sort_keys = true }) end)
            local c = mw.connect(s:url(), { reconnect = false, codec = "json", auto_reply = {
              match = function(m) return m.type == "ping" end,
              reply = function(m) return { type = "pong", id = m.id } end } })
            local seen = {}
            c:on_message(function(_, msg) seen[#seen + 1] = msg.type end)
            print(select(2, pcall(mw.connect, s:url(), { codec = "json", auto_reply = { match = "2", reply = function() return "3" end } })))
            mw.every(0.01, function(t)
              if #seen == 1 and #answers == 1 then
                print(table.concat(seen, ","), answers[1], c:stats().auto_replies)
                t:cancel() c:close() s:close()
              end
            end)
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            \(path):13: bad argument #2 to 'mw.connect' (opts.auto_reply.match: with codec = "json" a string match needs a string reply (the bytes are matched before decoding); match the decoded message with a function)
            hello\t{"id":7,"type":"pong"}\t1

            """)
    }

    /// c:answer(match, reply): `match` as in c:expect (pattern, table subset, function),
    /// `reply` a message through the codec or a function; answered pings are consumed.
    @Test func answerRepliesToThePeersPings() throws {
        let path = try CommandRunner.script("answer.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            local got = {}
            s:on_connect(function(peer)
              for _, m in ipairs { "2", '{"type":"ping","id":7}', '{"type":"hb"}', '{"type":"hello"}' } do peer:send(m) end
            end)
            s:on_message(function(peer, msg) got[#got + 1] = msg end)
            local c = mw.connect(s:url(), { reconnect = false, codec = "json" })
            c:answer({ type = "ping" }, function(m) return { pong = m.id } end)
            c:answer(function(m) return type(m) == "table" and m.type == "hb" end, { type = "hb_ack" })
            local plain = mw.connect(s:url(), { reconnect = false })
            plain:answer("^2$", "3")
            local seen = {}
            c:on_message(function(_, msg) seen[#seen + 1] = type(msg) == "table" and msg.type or tostring(msg) end)
            plain:on_message(function(_, msg) seen[#seen + 1] = "plain " .. msg:sub(1, 11) end)
            print(select(2, pcall(function() c:answer("%", "x") end)))
            print(select(2, pcall(function() c:answer("x", 42) end)))
            mw.every(0.01, function(t)
              if #got == 3 and #seen == 5 then
                table.sort(got) table.sort(seen)
                print(table.concat(got, " "))
                print(table.concat(seen, ","), c:stats().auto_replies, plain:stats().auto_replies)
                t:cancel() c:close() plain:close() s:close()
              end
            end)
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            \(path):15: bad argument #1 to 'c:answer' (bad Lua pattern "%": malformed pattern (ends with '%'))
            \(path):16: bad argument #2 to 'c:answer' (message or function expected, got number)
            3 {"pong":7} {"type":"hb_ack"}
            2,hello,plain {"type":"hb,plain {"type":"he,plain {"type":"pi\t2\t1

            """)
    }

    @Test func jsonCodecDecodesFramesAndReportsWhatDoesNotDecode() throws {
        let path = try CommandRunner.script("json_codec.lua", """
            local replies = { ['"big"'] = '{"id":9007199254740993,"f":1.0,"a":[]}', ['"bad"'] = '{oops' }
            local raw = assert(mw.listen("ws://127.0.0.1:0/"))
            raw:on_message(function(peer, msg) peer:send(replies[msg] or msg) end)
            local typed = assert(mw.listen("ws://127.0.0.1:0/", { codec = "json" }))
            typed:on_message(function(peer, msg)
              if msg.op == "double" then peer:send({ n = msg.n * 2, kind = math.type(msg.n), list = mw.json.array() }) end
            end)

            local c = mw.connect(raw:url(), { reconnect = false, codec = "json" })
            local errors = {}
            c:on_error(function(_, err, message) errors[#errors + 1] = err .. " | " .. tostring(message) end)
            assert(c:wait_open(10))
            c:send("big")
            local v = c:receive(10)
            print(math.type(v.id), v.id, math.type(v.f), mw.json.encode(v, { sort_keys = true }))
            c:send("bad")
            print(c:receive(10))
            print(errors[1])
            c:send({ op = "echo", x = { 1, 2 } })
            print(mw.json.encode(c:receive(10), { sort_keys = true }))
            print(pcall(c.send, c, { f = print }))

            -- No on_error handler: the decode error is logged; receive still says why.
            local quiet = mw.connect(raw:url(), { reconnect = false, codec = "json" })
            assert(quiet:wait_open(10))
            quiet:send("bad")
            print(quiet:receive(10))

            local t = mw.connect(typed:url(), { reconnect = false, codec = "json" })
            assert(t:wait_open(10))
            t:send({ op = "double", n = 4611686018427387904 // 2 })
            print(mw.json.encode(t:receive(10), { sort_keys = true }))
            -- A peer's message that does not decode on a codec = "json" server is logged.
            local plain = mw.connect(typed:url(), { reconnect = false })
            assert(plain:wait_open(10))
            plain:send("not json")
            plain:send('{"op":"double","n":1}')
            print(mw.json.decode((plain:receive(10))).n)
            mw.exit(0)
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            integer\t9007199254740993\tfloat\t{"a":[],"f":1.0,"id":9007199254740993}
            nil\tdecode: object key (a string) expected at line 1 column 2 (byte 2)
            decode: object key (a string) expected at line 1 column 2 (byte 2) | {oops
            {"op":"echo","x":[1,2]}
            false\t\(path):21: c:send: value.f: a function cannot be written as JSON
            nil\tdecode: object key (a string) expected at line 1 column 2 (byte 2)
            {"kind":"integer","list":[],"n":4611686018427387904}
            2

            """)
        #expect(r.stderr.contains(#"connection: decode: object key (a string) expected at line 1 column 2 (byte 2); the message (5 bytes): "{oops""#), "\(r.stderr)")
        #expect(r.stderr.contains(#"decode: unexpected character 'n' at line 1 column 1 (byte 1); the message (8 bytes): "not json""#), "\(r.stderr)")
    }

    @Test func manualReadyHoldsTheQueueUntilTheHandshakeIsDone() throws {
        let path = try CommandRunner.script("ready.lua", """
            local s = assert(mw.listen("ws://127.0.0.1:0/"))
            local got = {}
            s:on_message(function(peer, msg)
              got[#got + 1] = msg
              if msg == "hello" then peer:send("welcome") end
              if msg == "b" then print(table.concat(got, ",")) s:close() end
            end)
            local c = mw.connect(s:url(), { reconnect = false, ready = "manual" })
            print(c:send_now("too early"))
            c:send("a")
            assert(c:wait_open(10))
            print(c:state())
            c:send("b")
            c:send_now("hello")
            assert(c:expect("welcome", 10))
            c:on_ready(function(conn) print("on_ready", conn:state()) end)
            print(c:ready(), c:state(), c:ready())
            print(pcall(function() local x = mw.connect(s:url(), { ready = "later" }) end))
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            nil\tnot open
            open
            on_ready\tready
            true\tready\tfalse
            false\t\(path):18: bad argument #2 to 'mw.connect' (opts.ready: "open" or "manual" expected, got "later")
            hello,a,b

            """)
    }

    @Test func tcpFramingAndPingMisuseAreErrorsInWords() throws {
        let path = try CommandRunner.script("tcpmisuse.lua", """
            local s = assert(mw.listen("tcp://127.0.0.1:0"))
            s:on_message(function(peer, msg) peer:send("echo " .. msg) end)
            local c = mw.connect(s:url(), { reconnect = false })
            assert(c:wait_open(10))
            print(pcall(function() local ok = c:send("two\\nlines") end))
            print(pcall(function() local ok = c:ping() end))
            print(c:request("one line", "^echo", 10))
            local d = mw.connect(s:url(), { reconnect = false, framing = { delimiter = "\\0" } })
            assert(d:wait_open(10))
            print(pcall(function() local ok = d:send("a\\0b") end))
            c:close() d:close() s:close()
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            false\t\(path):5: bad argument #1 to 'c:send' (line framing: the message contains the delimiter "\\n"; it would arrive as two messages)
            false\t\(path):6: c:ping: a tcp:// or tls:// connection has no ping; to probe it, give it a heartbeat message (opts.heartbeat = { message = "ping" })
            echo one line	binary
            false\t\(path):10: bad argument #1 to 'c:send' (delimiter framing: the message contains the delimiter "\\0"; it would arrive as two messages)

            """)
    }

    @Test func reconnectAttemptsAreLoggedAtTheDefaultLevel() throws {
        let path = try CommandRunner.script("retry.lua", """
            local c = mw.connect("ws://127.0.0.1:1/", { reconnect = { initial = 0.01, factor = 1, jitter = 0, attempts = 2 } })
            c:on_error(function() end)
            print(c:wait_open(30))
            """)
        let r = try CommandRunner.run("run", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("retrying in 10 ms, attempt 1 of 2: connect: connection refused (127.0.0.1:1)"), "\(r.stderr)")
        #expect(r.stderr.contains("attempt 2 of 2"), "\(r.stderr)")
    }

    @Test func verboseLogsEventsAndVeryVerboseEveryMessage() throws {
        let peer = try EchoPeer()
        let path = try CommandRunner.script("verbose.lua", """
            local c = mw.connect(mw.args[1], { reconnect = false })
            print(c:request("hello", "hello", 10))
            print(c:request("\\1\\2\\3", "\\1", 10))
            c:close()
            """)
        let v = try CommandRunner.run("run", "-v", path, peer.url)
        #expect(v.status == 0, "\(v.stderr)")
        #expect(v.stderr.contains("connecting to \(peer.url)"), "\(v.stderr)")
        #expect(v.stderr.contains("open: \(peer.url)"), "\(v.stderr)")
        #expect(!v.stderr.contains("> text"), "\(v.stderr)")
        let vv = try CommandRunner.run("run", "-vv", path, peer.url)
        #expect(vv.status == 0, "\(vv.stderr)")
        #expect(vv.stderr.contains("> text 5 bytes: hello (queued)"), "\(vv.stderr)")
        #expect(vv.stderr.contains("< text 5 bytes: hello"), "\(vv.stderr)")
        #expect(vv.stderr.contains("> text 3 bytes: 01 02 03"), "\(vv.stderr)")
        #expect(vv.stderr.contains("< text 3 bytes: 01 02 03"), "\(vv.stderr)")
    }
}

/// The protocol examples against real servers nobody here wrote.
@Suite(.timeLimit(.minutes(5))) struct ProtocolExampleTests {
    /// The module (mqtt_ws.lua) and MQTT by hand through a WebSocket framing function
    /// (ws_framing.lua) say the same against mosquitto.
    @Test(arguments: ["examples/mqtt_ws.lua", "examples/ws_framing.lua"])
    func mqttOverWebSocketAgainstMosquitto(example: String) throws {
        let broker = try MosquittoPeer()
        let r = try CommandRunner.run("run", example, broker.url, "moonwire/test")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            CONNACK\t0
            SUBACK\t1
            PUBLISH\tmoonwire/test\thello at QoS 0\tqos 0
            PUBACK\t2
            PUBLISH\tmoonwire/test\thello at QoS 1\tqos 1

            """)
    }

    @Test func socketIOv4AgainstPythonSocketIO() throws {
        let server = try EchoPeer(script: "socketio_server.py")
        let r = try CommandRunner.run("run", "examples/socketio_client.lua", server.url)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            engine.io open, ping every 25000 ms
            connected, sid is a string
            ready: the queue goes out
            event\tchat\techo: hello
            ack\t5
            ack\t42
            state\tready

            """)
    }
}
