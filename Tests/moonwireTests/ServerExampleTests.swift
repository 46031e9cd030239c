import Foundation
import Testing

/// The examples that start their own servers: they need nothing outside.
@Suite(.timeLimit(.minutes(5))) struct ServerExampleTests {
    @Test func demo() throws {
        let r = try CommandRunner.run("run", "examples/demo.lua")
        #expect(r.status == 0, "\(r.stderr)")
        // Bots run concurrently: the set of lines is fixed, their interleaving is not.
        #expect(r.stdout.split(separator: "\n").sorted() == [
            "ann hears ann: hi, I am ann", "ann hears bob: hi, I am bob", "ann hears cy: hi, I am cy",
            "bob hears bob: hi, I am bob", "bob hears cy: hi, I am cy", "cy  hears cy: hi, I am cy",
        ])
    }

    @Test func tcpLengthPrefixed() throws {
        let r = try CommandRunner.run("run", "examples/tcp_length_prefixed.lua")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "1\tALPHA\n2\tBETA\n3\tGAMMA\n")
    }

    @Test func customFraming() throws {
        let r = try CommandRunner.run("run", "examples/custom_framing.lua")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "[first]\n[second, with $3:odd bytes]\n[]\n")
    }

    @Test func basicAuthInTheURL() throws {
        let r = try CommandRunner.run("run", "examples/basic_auth.lua")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "ann: welcome, ann\nbob: closed 1008 who are you?\n")
    }

    @Test func resilientBotSurvivesItsServerRestarting() throws {
        let r = try CommandRunner.run("run", "examples/resilient_bot.lua")
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "open (reconnects: 0)")
        #expect(lines.contains("open (reconnects: 1)"))
        #expect(lines.contains("closed 1000 by peer, will reconnect: true"), "\(lines)")
        let summary = try #require(lines.first { $0.hasPrefix("logins ") })
        #expect(summary.hasPrefix("logins 2, "))
        #expect(summary.hasSuffix("all in order: true"))
        let counts = summary.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(counts[1].dropFirst(5) == counts[2].dropFirst(9), "every message sent arrived: \(summary)")
    }

    @Test func loadWorkersEachWithItsOwnServer() throws {
        let r = try CommandRunner.run("run", "--workers", "3", "examples/load_workers.lua")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.split(separator: "\n").sorted() == (1...3).map { "worker \($0) of 3: 4 connections, 400 round trips" })
        for worker in 1...3 {
            #expect(r.stderr.contains(" round trips/s worker=\(worker)\n"))
        }
    }

    @Test func chatServerAndBot() throws {
        let (server, _, err) = CommandRunner.process(["run", "examples/chat_server.lua", "ws://127.0.0.1:0/chat"])
        try server.run()
        // The chat server would run for ever: killed at the end, or at the deadline if the test hangs.
        let deadline = ProcessDeadline(server, seconds: 120)
        defer {
            kill(server.processIdentifier, SIGKILL)
            server.waitUntilExit()
            deadline.check("the chat server")
        }
        // The server logs its URL once it listens.
        var log = ""
        while !log.contains("chat server on ") {
            let chunk = err.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            log += String(decoding: chunk, as: UTF8.self)
        }
        let url = try #require(log.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) })
        let bot = try CommandRunner.run("run", "examples/chat_bot.lua", url, "ann")
        #expect(bot.status == 0, "\(bot.stderr)")
        #expect(bot.stdout == "ann heard ann: hello from ann\n")
    }

    @Test func protocolSuiteInExamplesTests() throws {
        // Both clocks: the protocol suite does not depend on which one it runs on.
        for flags in [[], ["--virtual-time"]] {
            let r = try CommandRunner.run(["test"] + flags + ["examples/tests"])
            #expect(r.status == 0, "\(r.stdout)")
            #expect(r.stdout.hasSuffix("55 passed, 0 failed\n"), "\(r.stdout)")
        }
    }
}
