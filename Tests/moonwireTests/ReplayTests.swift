import Foundation
import Testing

/// A `moonwire` process that keeps running (a server): it is killed when the
/// test is done with it, and whatever the test waits for has a deadline.
final class Background {
    let process: Process
    private let lines = LineCollector()

    /// Starts `moonwire arguments` and waits (at most `seconds`) for a line of stdout or
    /// stderr containing `marker`; returns that line's last word (a URL).
    init(_ arguments: [String], waitFor marker: String, seconds: Double = 30) throws {
        let (p, out, err) = CommandRunner.process(arguments)
        process = p
        lines.follow(out.fileHandleForReading)
        lines.follow(err.fileHandleForReading)
        try process.run()
        guard lines.wait(for: marker, seconds: seconds) != nil else {
            kill(process.processIdentifier, SIGKILL)
            throw PeerError("moonwire \(arguments.joined(separator: " ")) did not print '\(marker)' in \(seconds) s: \(lines.text)")
        }
    }

    /// The last word of the line with `marker`.
    func word(after marker: String) -> String {
        let line = lines.wait(for: marker, seconds: 0) ?? ""
        return String(line.split(separator: " ").last ?? "")
    }

    var output: String { lines.text }

    /// Waits (with a deadline) for the process to end by itself.
    func waitForExit(seconds: Double) -> Int32? {
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            self.process.waitUntilExit()
            done.signal()
        }
        guard done.wait(timeout: .now() + seconds) == .success else { return nil }
        lines.drain()
        return process.terminationStatus
    }

    deinit {
        // The test runner's children inherit a blocked SIGTERM: only SIGKILL is sure.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// Everything a process writes, as lines, with a way to wait for one.
final class LineCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var buffer = ""
    private let readers = DispatchGroup()

    var text: String {
        condition.lock()
        defer { condition.unlock() }
        return buffer
    }

    func follow(_ handle: FileHandle) {
        readers.enter()
        DispatchQueue.global().async {
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                self.condition.lock()
                self.buffer += String(decoding: chunk, as: UTF8.self)
                self.condition.broadcast()
                self.condition.unlock()
            }
            self.readers.leave()
        }
    }

    /// Both pipes read to their end (after the process exited).
    func drain() { _ = readers.wait(timeout: .now() + 5) }

    func wait(for marker: String, seconds: Double) -> String? {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let line = buffer.split(separator: "\n").first(where: { $0.contains(marker) }) { return String(line) }
            guard condition.wait(until: deadline) else { return nil }
        }
    }
}

extension CommandRunner {
    /// Runs `moonwire arguments` with extra environment; killed after `seconds`.
    static func timed(_ arguments: [String], environment: [String: String] = [:], seconds: Double = 60) throws -> Result {
        let (process, out, err) = process(arguments)
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let lines = LineCollector()
        let stdout = LineCollector()
        stdout.follow(out.fileHandleForReading)
        lines.follow(err.fileHandleForReading)
        try process.run()
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            process.waitUntilExit()
            done.signal()
        }
        if done.wait(timeout: .now() + seconds) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            done.wait()
        }
        stdout.drain()
        lines.drain()
        return Result(status: process.terminationStatus, stdout: stdout.text, stderr: lines.text)
    }
}

@Suite(.serialized, .timeLimit(.minutes(5))) struct ReplayTests {
    let dir: URL = {
        (try? Scratch.folder("replay-\(UUID().uuidString.prefix(8))")) ?? Scratch.root
    }()

    func path(_ name: String) -> String { dir.appendingPathComponent(name).path }

    /// examples/chat_server.lua on a free port; `changed` edits its source first.
    func chatServer(changed: ((String) -> String)? = nil) throws -> (Background, String) {
        var script = "examples/chat_server.lua"
        if let changed {
            let source = try String(contentsOf: CommandRunner.packageRoot.appendingPathComponent(script), encoding: .utf8)
            script = path("changed_chat_server.lua")
            try changed(source).write(toFile: script, atomically: true, encoding: .utf8)
        }
        let server = try Background(["run", script, "ws://127.0.0.1:0/chat"], waitFor: "chat server on ")
        return (server, server.word(after: "chat server on "))
    }

    func replayServer(_ recording: String, _ extra: [String] = []) throws -> (Background, String) {
        let server = try Background(["replay", recording, "--serve", "ws://127.0.0.1:0/chat"] + extra, waitFor: "replaying ")
        return (server, server.word(after: "replaying "))
    }

    /// Record against the real server, replay it, and test both with the generated test.
    @Test func recordReplayAndGenerateATestThatPassesAgainstBoth() throws {
        let (chat, chatURL) = try chatServer()
        let recording = path("session.jsonl")
        let session = try CommandRunner.timed(["run", "--record", recording, "examples/chat_session.lua", chatURL])
        #expect(session.status == 0, "\(session.stderr)")
        #expect(session.stdout.hasSuffix("welcome, ann\nann said hi\n"))

        // The format: a header, then the connection's events in order.
        let lines = try String(contentsOfFile: recording, encoding: .utf8).split(separator: "\n")
        let objects = try lines.map { try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(objects[0]["moonwire_recording"] as? Int == 1)
        #expect(objects[0]["started"] is String)
        let events = objects.dropFirst().map { "\($0["event"]!) \($0["dir"] ?? "-")" }
        #expect(events == ["open -", "message in", "message out", "message in", "message out", "message in", "close -"])
        #expect(objects[1]["url"] as? String == chatURL)

        let test = path("session_test.lua")
        let generated = try CommandRunner.timed(["replay", recording, "--generate-test", "--ignore", "id", "-o", test])
        #expect(generated.status == 0, "\(generated.stderr)")
        let source = try String(contentsOfFile: test, encoding: .utf8)
        #expect(source.contains(#"it("exchange 2: op=login, 1 reply", function()"#))
        // The chat server's JSON has no fixed key order: the recorded bytes are sent as they were.
        let send = source.split(separator: "\n").first { $0.hasPrefix("    c:send([[{") && $0.contains(#""op":"login""#) }
        #expect(send?.contains(#""user":"ann""#) == true, "\(source)")
        #expect(source.contains(#"local url = os.getenv("MW_URL") or "\#(chatURL)""#))

        let (replay, replayURL) = try replayServer(recording, ["--ignore", "id"])
        for url in [replayURL, chatURL] {
            let r = try CommandRunner.timed(["test", test], environment: ["MW_URL": url])
            #expect(r.status == 0, "against \(url): \(r.stdout)\(r.stderr)")
            #expect(r.stdout.contains("3 passed, 0 failed"), "\(r.stdout)")
        }
        // The client side, against both.
        for url in [replayURL, chatURL] {
            let r = try CommandRunner.timed(["replay", recording, "--client", url, "--ignore", "id", "--speed", "0"])
            #expect(r.status == 0, "against \(url): \(r.stdout)\(r.stderr)")
            #expect(r.stdout.hasSuffix("all 3 exchanges matched\n"), "\(r.stdout)")
        }

        // One reply changed on the server: the generated test fails and names the exchange.
        let (changed, changedURL) = try chatServer { $0.replacingOccurrences(of: #"op = "welcome""#, with: #"op = "welcomed""#) }
        let failing = try CommandRunner.timed(["test", test], environment: ["MW_URL": changedURL])
        #expect(failing.status == 1, "\(failing.stdout)\(failing.stderr)")
        #expect(failing.stdout.contains("exchange 2, reply 1: the reply differs from the recording"), "\(failing.stdout)")
        #expect(failing.stdout.contains("welcomed"), "\(failing.stdout)")
        #expect(failing.stdout.contains("2 passed, 1 failed"), "\(failing.stdout)")
        let client = try CommandRunner.timed(["replay", recording, "--client", changedURL, "--ignore", "id", "--speed", "0"])
        #expect(client.status == 1)
        #expect(client.stderr.contains("exchange 2, reply 1: differs from the recording"), "\(client.stderr)")
        #expect(client.stderr.contains(#"$.op: expected "welcome", got "welcomed""#), "\(client.stderr)")
        _ = (chat, replay, changed)
    }

    /// An array-framed protocol (OCPP 1.6J): the server's CALL carries a fresh message
    /// id at [1] and its CALLRESULT a fresh time at [2].currentTime. --ignore names them
    /// by position, in the replay and in the generated test; a bad position is exit 2.
    @Test func ignoreNamesArrayPositions() throws {
        let serverScript = path("ocpp_server.lua")
        try """
            local s = assert(mw.listen("ws://127.0.0.1:0/ocpp"))
            print("ocpp server on " .. s:url())
            local n = 0
            s:on_connect(function(peer)
              n = n + 1
              peer:send(mw.json.encode({ 2, ("%d-%x"):format(n, math.random(1 << 30)), "GetConfiguration", mw.json.object() }))
            end)
            s:on_message(function(peer, msg)
              local call = mw.json.decode(msg)
              peer:send(mw.json.encode({ 3, call[2], { currentTime = tostring(mw.now()), interval = 300 } }))
            end)
            """.write(toFile: serverScript, atomically: true, encoding: .utf8)
        let server = try Background(["run", serverScript], waitFor: "ocpp server on ")
        let url = server.word(after: "ocpp server on ")
        let clientScript = path("ocpp_client.lua")
        try """
            local c = mw.connect(mw.args[1], { reconnect = false })
            assert(c:receive(5))
            c:send('[2,"boot-1","Heartbeat",{}]')
            assert(c:receive(5))
            c:close()
            """.write(toFile: clientScript, atomically: true, encoding: .utf8)
        let recording = path("ocpp.jsonl")
        let session = try CommandRunner.timed(["run", "--record", recording, clientScript, url])
        #expect(session.status == 0, "\(session.stderr)")

        func replay(_ ignore: String) throws -> CommandRunner.Result {
            try CommandRunner.timed(["replay", recording, "--client", url, "--speed", "0", "--timeout", "5"] + (ignore.isEmpty ? [] : ["--ignore", ignore]))
        }
        let plain = try replay("currentTime")
        #expect(plain.status == 1, "\(plain.stdout)\(plain.stderr)")
        #expect(plain.stderr.contains("$[1]: expected \"1-"), "\(plain.stderr)")
        for ignore in ["[1],$[2].currentTime", "$[1],[2].currentTime", "*[1],currentTime"] {
            let r = try replay(ignore)
            #expect(r.status == 0, "--ignore \(ignore): \(r.stdout)\(r.stderr)")
            #expect(r.stdout.hasSuffix("all 2 exchanges matched\n"), "--ignore \(ignore): \(r.stdout)")
        }
        // A position names that position only.
        let wrong = try replay("[2],$[2].currentTime")
        #expect(wrong.status == 1, "\(wrong.stdout)\(wrong.stderr)")

        let test = path("ocpp_test.lua")
        let generated = try CommandRunner.timed(["replay", recording, "--generate-test", "--ignore", "[1],$[2].currentTime", "-o", test])
        #expect(generated.status == 0, "\(generated.stderr)")
        let passing = try CommandRunner.timed(["test", test], environment: ["MW_URL": url])
        #expect(passing.status == 0, "\(passing.stdout)\(passing.stderr)")
        #expect(passing.stdout.contains("2 passed, 0 failed"), "\(passing.stdout)")
        let strict = path("ocpp_strict_test.lua")
        _ = try CommandRunner.timed(["replay", recording, "--generate-test", "--ignore", "[2].currentTime", "-o", strict])
        let failing = try CommandRunner.timed(["test", strict], environment: ["MW_URL": url])
        #expect(failing.stdout.contains("1 passed, 1 failed"), "\(failing.stdout)")

        let bad = try CommandRunner.timed(["replay", recording, "--client", url, "--ignore", "a[x]"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--ignore 'a[x]': '[x]' is not a position: a number from 0, or *"), "\(bad.stderr)")
        _ = server
    }

    /// A client that says something else than recorded: a diff on the server, close code 4400.
    @Test func replayServerReportsAMismatchWithADiffAndACloseCode() throws {
        let recording = path("mismatch.jsonl")
        try """
            {"moonwire_recording":1,"moonwire":"0.1.0","started":"2026-11-23T09:00:00.000Z","url":"ws://127.0.0.1:9000/chat","headers":{}}
            {"t":0.01,"c":1,"event":"open","url":"ws://127.0.0.1:9000/chat","headers":{},"reconnects":0}
            {"t":0.02,"c":1,"event":"message","dir":"out","kind":"text","data":"{\\"op\\":\\"login\\",\\"user\\":\\"ann\\",\\"ts\\":1}"}
            {"t":0.03,"c":1,"event":"message","dir":"in","kind":"text","data":"{\\"op\\":\\"welcome\\"}"}

            """.write(toFile: recording, atomically: true, encoding: .utf8)
        let (server, url) = try replayServer(recording, ["--ignore", "ts", "--once"])
        let client = try CommandRunner.script("mismatch_client.lua", """
            local c = mw.connect(assert(mw.args[1]), { reconnect = false })
            c:on_close(function(_, code, reason) print(code, reason) end)
            c:send('{"op":"login","user":"bob","ts":2}')
            print(c:receive(5))
            """)
        let r = try CommandRunner.timed(["run", client, url])
        #expect(r.stdout.hasPrefix("4400\texchange 1: the client's message differs from the recording\n"), "\(r.stdout)\(r.stderr)")
        #expect(server.waitForExit(seconds: 30) == 1)
        #expect(server.output.contains(#"$.user: expected "ann", got "bob""#), "\(server.output)")
        #expect(!server.output.contains("$.ts"), "ts is ignored")
    }

    /// The HAR fixture: imported, served, and its generated test passes against the
    /// replay and against the chat server it speaks to.
    @Test func harFixtureImportedServedAndTested() throws {
        let har = CommandRunner.packageRoot.appendingPathComponent("Tests/moonwireTests/Fixtures/har/chat_chrome.har").path
        let recording = path("har.jsonl")
        let imported = try CommandRunner.timed(["replay", "--from-har", har, "-o", recording])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout == "\(recording): 1 connection, 5 messages\n")
        let text = try String(contentsOfFile: recording, encoding: .utf8)
        #expect(text.contains(#""Cookie":"[redacted]""#))
        #expect(!text.contains("9f2c4e7a1b"))

        let test = path("har_test.lua")
        #expect(try CommandRunner.timed(["replay", recording, "--generate-test", "--ignore", "id", "-o", test]).status == 0)
        let (replay, replayURL) = try replayServer(recording, ["--ignore", "id", "--speed", "0"])
        let (chat, chatURL) = try chatServer()
        for url in [replayURL, chatURL] {
            let r = try CommandRunner.timed(["test", test], environment: ["MW_URL": url])
            #expect(r.status == 0, "against \(url): \(r.stdout)\(r.stderr)")
            #expect(r.stdout.contains("3 passed, 0 failed"), "\(r.stdout)")
        }
        _ = (replay, chat)
    }

    @Test func badInputNamesFileAndLineExits2AndReplaysNothing() throws {
        let header = #"{"moonwire_recording":1,"moonwire":"0.1.0","headers":{}}"#
        let message = #"{"t":0.1,"c":1,"event":"message","dir":"out","kind":"text","data":"hi"}"#
        let cases: [(String, String, String)] = [
            ("truncated.jsonl", "\(header)\n\(message)\n{\"t\":0.2,\"c\":1,\"ev", ":3: cut short"),
            ("corrupt.jsonl", "\(header)\n\(message)\nnot json\n", ":3: not a JSON object"),
            ("version.jsonl", "{\"moonwire_recording\":99}\n\(message)\n", ":1: recording format version 99 is not known"),
            ("base64.jsonl", "\(header)\n{\"t\":0.1,\"c\":1,\"event\":\"message\",\"dir\":\"in\",\"kind\":\"binary\",\"data\":\"%%%\"}\n", ":2: \"data\" is not valid base64"),
            ("unknown.jsonl", "\(header)\n{\"t\":0.1,\"c\":1,\"event\":\"teleport\"}\n", ":2: unknown event \"teleport\""),
        ]
        for (name, content, expected) in cases {
            let file = path(name)
            try content.write(toFile: file, atomically: true, encoding: .utf8)
            for mode in [["--serve", "ws://127.0.0.1:0/"], ["--client", "ws://127.0.0.1:1/"], ["--generate-test", "-o", path("never.lua")]] {
                let r = try CommandRunner.timed(["replay", file] + mode, seconds: 30)
                #expect(r.status == 2, "\(name) \(mode): \(r.stderr)")
                #expect(r.stderr.contains(file + expected), "\(name): \(r.stderr)")
                #expect(r.stdout.isEmpty, "nothing replayed: \(r.stdout)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: path("never.lua")))
        let empty = CommandRunner.packageRoot.appendingPathComponent("Tests/moonwireTests/Fixtures/har/empty_chrome.har").path
        let r = try CommandRunner.timed(["replay", "--from-har", empty, "-o", path("none.jsonl")], seconds: 30)
        #expect(r.status == 2)
        #expect(r.stderr.contains("\(empty): no WebSocket messages"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path("none.jsonl")))
    }

    /// A killed process leaves every event up to the last one readable; secrets are
    /// redacted unless asked for.
    @Test func recordingSurvivesKillAndRedactsSecrets() throws {
        let (chat, chatURL) = try chatServer()
        let script = try CommandRunner.script("record_and_hang.lua", """
            local c = mw.connect(mw.args[1], { record = mw.args[2], reconnect = false,
              headers = { Authorization = "Bearer s3cret", ["X-Api-Token"] = "t0ken", ["X-Trace"] = "visible" } })
            assert(c:receive(5))
            assert(c:request('{"op":"login","user":"kim"}', "welcome", 5))
            print("ready")
            io.stdout:flush()
            mw.sleep(600)
            """)
        let recording = path("killed.jsonl")
        let running = try Background(["run", script, chatURL, recording], waitFor: "ready")
        kill(running.process.processIdentifier, SIGKILL)
        #expect(running.waitForExit(seconds: 30) != nil)
        let text = try String(contentsOfFile: recording, encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        #expect(!text.contains("s3cret") && !text.contains("t0ken"))
        #expect(text.contains(#""X-Trace":"visible""#))
        let test = try CommandRunner.timed(["replay", recording, "--generate-test", "-o", path("killed_test.lua")])
        #expect(test.status == 0, "\(test.stderr)")
        #expect(test.stdout.hasSuffix("2 exchanges\n"))

        let secrets = path("secrets.jsonl")
        let short = try CommandRunner.script("record_secrets.lua", """
            local c = mw.connect(mw.args[1], { reconnect = false, headers = { Authorization = "Bearer s3cret" } })
            assert(c:receive(5))
            c:close()
            """)
        let kept = try CommandRunner.timed(["run", "--record", secrets, "--record-secrets", short, chatURL])
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(try String(contentsOfFile: secrets, encoding: .utf8).contains(#""Authorization":"Bearer s3cret""#))
        _ = chat
    }
}
