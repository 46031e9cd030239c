import Foundation
import Testing

/// Proxies (`opts.proxy`, the proxy environment variables, `connect --proxy`) against real
/// tinyproxy and microsocks processes, and TLS refusals in words, over real sockets.
@Suite("Proxies and TLS errors", .serialized, .timeLimit(.minutes(5)))
struct ProxyTests {
    /// The test runner's own proxy variables must not leak into the commands.
    static let noProxyVariables: [String: String] = Dictionary(uniqueKeysWithValues:
        ["http_proxy", "https_proxy", "all_proxy", "no_proxy"].flatMap { [($0, ""), ($0.uppercased(), "")] })

    static func proxy(_ name: String) throws -> ProxyPeer {
        switch name {
        case "http": return try ProxyPeer(.http())
        case "http with basic auth": return try ProxyPeer(.http(auth: ("ann", "s3cret")))
        default: return try ProxyPeer(.socks5)
        }
    }

    @Test("ws, wss, tcp and tls through a real proxy", arguments: ["http", "http with basic auth", "socks5"])
    func examplesThroughProxy(kind: String) throws {
        let proxy = try Self.proxy(kind)
        let certificates = try TestCertificates.files.get()
        let r = try CommandRunner.run(
            ["run", "examples/proxy.lua", proxy.url],
            environment: Self.noProxyVariables.merging(certificates.environment) { $1 }
        )
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        for scheme in ["ws", "wss", "tcp", "tls"] {
            // The servers saw the proxy's outgoing address: the connection went through it.
            #expect(r.stdout.contains("\(scheme) server: connection from \(ProxyPeer.outgoingAddress):"), "\(r.stdout)")
            #expect(r.stdout.contains("\(scheme)://127.0.0.1:"), "\(r.stdout)")
        }
        #expect(r.stdout.components(separatedBy: "answered: hello through the proxy").count == 5, "\(r.stdout)")
        #expect(!r.stdout.contains("connection from 127.0.0.1:"), "\(r.stdout)")
        if kind.hasPrefix("http") {
            #expect(proxy.log.contains("CONNECT 127.0.0.1:"), "\(proxy.log)")
        }
    }

    @Test("proxy refusals name the proxy, the target and the reason")
    func refusals() throws {
        let target = "ws://127.0.0.1:\(try MosquittoPeer.freePort())/"
        func failure(_ proxy: String, _ url: String = target) throws -> String {
            let r = try CommandRunner.run(["run", "examples/proxy.lua", proxy, url], environment: Self.noProxyVariables)
            #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
            return r.stdout
        }
        let port = target.split(separator: ":").last!.dropLast()

        let limited = try ProxyPeer(.http(onlyPort: 443))
        #expect(try failure(limited.url).contains(
            "failed: connect: http proxy 127.0.0.1:\(limited.port) refused CONNECT to 127.0.0.1:\(port): 403 Forbidden"))

        let guarded = try ProxyPeer(.http(auth: ("ann", "s3cret")))
        #expect(try failure("http://127.0.0.1:\(guarded.port)").contains(
            "refused CONNECT to 127.0.0.1:\(port): 407 Proxy Authentication Required (give the user name and password in the proxy URL"))

        let socks = try ProxyPeer(.socks5)
        #expect(try failure(socks.url).contains(
            "failed: connect: socks5 proxy 127.0.0.1:\(socks.port) could not connect to 127.0.0.1:\(port): "))

        let nobody = try MosquittoPeer.freePort()
        #expect(try failure("socks5://127.0.0.1:\(nobody)").contains(
            "failed: connect: socks5 proxy 127.0.0.1:\(nobody): connection refused"))
    }

    @Test("HTTP_PROXY is honoured for ws://, NO_PROXY bypasses it, proxy = false ignores it")
    func environment() throws {
        let http = try ProxyPeer(.http())
        let socks = try ProxyPeer(.socks5)
        func run(_ variables: [String: String]) throws -> String {
            let r = try CommandRunner.run(
                ["run", "examples/proxy.lua", "env"], environment: Self.noProxyVariables.merging(variables) { $1 })
            #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
            return r.stdout
        }
        let through = "connection from \(ProxyPeer.outgoingAddress):"
        // HTTP_PROXY is for ws:// only; tcp:// takes ALL_PROXY alone.
        var out = try run(["HTTP_PROXY": http.url])
        #expect(out.contains("ws server: \(through)") && out.contains("tcp server: connection from 127.0.0.1:"), "\(out)")
        out = try run(["HTTP_PROXY": http.url, "NO_PROXY": "localhost, 127.0.0.1"])
        #expect(out.contains("ws server: connection from 127.0.0.1:"), "\(out)")
        out = try run(["http_proxy": http.url, "ALL_PROXY": socks.url])
        #expect(out.contains("ws server: \(through)") && out.contains("tcp server: \(through)"), "\(out)")
        #expect(http.log.contains("CONNECT 127.0.0.1:"), "\(http.log)")

        let script = try CommandRunner.script("proxy_false.lua", """
            local s = mw.listen("ws://127.0.0.1:0/")
            s:on_connect(function(peer, request) print("from " .. request.remote_address); mw.exit(0) end)
            mw.connect(s:url(), { proxy = false, reconnect = false })
            """)
        let r = try CommandRunner.run(["run", script], environment: Self.noProxyVariables.merging(["HTTP_PROXY": http.url]) { $1 })
        #expect(r.stdout.hasPrefix("from 127.0.0.1:"), "\(r.stdout)\(r.stderr)")
    }

    @Test("reconnects go through the proxy again; connect_timeout covers a proxy that never answers")
    func reconnectAndTimeout() throws {
        let socks = try ProxyPeer(.socks5)
        let script = try CommandRunner.script("proxy_reconnect.lua", """
            local s = mw.listen("ws://127.0.0.1:0/")
            local accepted = 0
            s:on_connect(function(peer, request)
              accepted = accepted + 1
              print("server: connection " .. accepted .. " from " .. request.remote_address)
            end)
            -- The first connection is dropped once it carried a message.
            s:on_message(function(peer) if accepted == 1 then peer:abort() end end)
            local c = mw.connect(s:url(), { proxy = mw.args[1], reconnect = { initial = 0.05, jitter = 0 } })
            local opens = 0
            c:on_open(function()
              opens = opens + 1
              if opens == 1 then c:send("hello") else print("reopened"); c:close(); s:close() end
            end)

            -- A "proxy" that accepts and never answers.
            local silent = mw.listen("tcp://127.0.0.1:0", { framing = "raw" })
            local t = mw.connect("ws://127.0.0.1:9/", {
              proxy = "http://" .. silent:url():match("//(.*)"), connect_timeout = 0.5, reconnect = false })
            local ok, err = t:wait_open(10)
            print(err)
            silent:close()
            """)
        let r = try CommandRunner.run(["run", script, socks.url], environment: Self.noProxyVariables)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasPrefix("server: connection") && $0.contains(" from \(ProxyPeer.outgoingAddress):") }.count == 2, "\(r.stdout)")
        #expect(lines.contains("reopened"), "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("timeout: ") && $0.contains("http proxy 127.0.0.1:") }, "\(r.stdout)")
    }

    @Test("a server that speaks first: its greeting, sent as the tunnel opens, is not lost", arguments: ["http", "socks5"])
    func greetingThroughTunnel(kind: String) throws {
        let proxy = try Self.proxy(kind)
        let script = try CommandRunner.script("proxy_greeting.lua", """
            local s = mw.listen("tcp://127.0.0.1:0")
            s:on_connect(function(peer) peer:send("greeting 1"); peer:send("greeting 2") end)
            local c = mw.connect(s:url(), { proxy = mw.args[1], reconnect = false })
            assert(c:wait_open(10))
            print(c:receive(5))
            print(c:receive(5))
            mw.exit(0)
            """)
        let r = try CommandRunner.run(["run", script, proxy.url], environment: Self.noProxyVariables)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "greeting 1\tbinary\ngreeting 2\tbinary\n", "\(r.stdout)")
    }

    @Test("a bad opts.proxy is an error at the caller's line")
    func badProxyOption() throws {
        let script = try CommandRunner.script("bad_proxy.lua", """
            local url = "ws://127.0.0.1:9/"
            mw.connect(url, { proxy = "ftp://127.0.0.1:21" })
            """)
        let r = try CommandRunner.run(["run", script])
        #expect(r.status == 1)
        #expect(r.stderr.contains(
            "bad_proxy.lua:2: bad argument #2 to 'mw.connect' (opts.proxy: 'ftp://127.0.0.1:21' is not a proxy URL: unknown scheme 'ftp'"),
            "\(r.stderr)")
    }

    @Test("moonwire connect --proxy goes through the proxy")
    func connectCommand() throws {
        let peer = try EchoPeer()
        let proxy = try ProxyPeer(.http())
        let r = try CommandRunner.run(
            ["connect", "--proxy", proxy.url, peer.url], input: "one\ntwo\n", environment: Self.noProxyVariables)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "one\ntwo\n")
        #expect(proxy.log.contains("CONNECT 127.0.0.1:\(peer.port)"), "\(proxy.log)")

        let bad = try CommandRunner.run(["connect", "--proxy", "socks5://u:p@127.0.0.1:1", peer.url])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--proxy 'socks5://u:***@127.0.0.1:1' is not a proxy URL: SOCKS5 with a user name"), "\(bad.stderr)")
    }

    /// A wss:// server with `cert`, and a client that says why it refused it.
    private func tlsRefusal(cert: String, url: String, ca: String?, proxy: String? = nil, bind: String = "127.0.0.1") throws -> String {
        let certificates = try TestCertificates.files.get()
        let script = try CommandRunner.script("tls_refusal.lua", """
            local cert, key, url, ca, proxy, bind = table.unpack(mw.args)
            local s = mw.listen("wss://" .. bind .. ":0/", { tls = { cert = cert, key = key } })
            local port = s:url():match(":(%d+)/")
            local opts = { reconnect = false, tls = ca ~= "" and { ca = ca } or nil, proxy = proxy ~= "" and proxy or false }
            local c = mw.connect((url:gsub("PORT", port)), opts)
            local ok, err = c:wait_open(10)
            print(ok and "open" or err)
            mw.exit(0)
            """)
        let r = try CommandRunner.run(["run", script, cert, certificates.key, url, ca ?? "", proxy ?? "", bind])
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout
    }

    @Test("TLS refusals in words: self-signed, unknown authority, host name mismatch, also through a proxy")
    func tlsErrors() throws {
        let files = try TestCertificates.files.get()
        #expect(try tlsRefusal(cert: files.selfSigned, url: "wss://localhost:PORT/", ca: nil).hasPrefix(
            "tls: certificate verify failed (self-signed certificate) for host localhost (trust its issuer with tls = { ca = \"file.pem\" }"))
        #expect(try tlsRefusal(cert: files.cert, url: "wss://localhost:PORT/", ca: nil).hasPrefix(
            "tls: certificate verify failed (issued by an authority that is not trusted) for host localhost"))
        let mismatch = "tls: certificate verify failed (not for this host name: it is for other.example) for host localhost"
        #expect(try tlsRefusal(cert: files.otherName, url: "wss://localhost:PORT/", ca: files.ca).hasPrefix(mismatch))
        // Through a tunnel, the certificate is still checked against the target's name.
        let socks = try ProxyPeer(.socks5)
        #expect(try tlsRefusal(cert: files.otherName, url: "wss://localhost:PORT/", ca: files.ca, proxy: socks.url).hasPrefix(mismatch))
        #expect(try tlsRefusal(cert: files.cert, url: "wss://localhost:PORT/", ca: files.ca, proxy: socks.url).hasPrefix("open"))
        // An IP address target is checked against the certificate's IP addresses: the
        // target's (127.0.0.2 here), not the proxy's (127.0.0.1, which the certificate lists).
        #expect(try tlsRefusal(cert: files.cert, url: "wss://127.0.0.1:PORT/", ca: files.ca, proxy: socks.url).hasPrefix("open"))
        let wrongIP = "tls: certificate verify failed (not for this host name: it is for localhost, 127.0.0.1) for host 127.0.0.2"
        #expect(try tlsRefusal(cert: files.cert, url: "wss://127.0.0.2:PORT/", ca: files.ca, bind: "127.0.0.2").hasPrefix(wrongIP))
        #expect(try tlsRefusal(
            cert: files.cert, url: "wss://127.0.0.2:PORT/", ca: files.ca, proxy: socks.url, bind: "127.0.0.2").hasPrefix(wrongIP))
    }
}
