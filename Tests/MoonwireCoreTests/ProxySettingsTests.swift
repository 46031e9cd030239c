import MoonwireCore
import Testing

@Suite("Proxy URLs and the proxy environment variables", .timeLimit(.minutes(5)))
struct ProxySettingsTests {
    @Test("proxy URLs: schemes, default ports, credentials, refusals")
    func parsing() throws {
        let http = try ProxySettings("http://ann:s%40cret@proxy.example:3128/")
        #expect(http.kind == .http && http.host == "proxy.example" && http.port == 3128)
        #expect(http.credentials == Credentials(user: "ann", password: "s@cret"))
        #expect(http.description == "http://ann:***@proxy.example:3128")
        #expect(try ProxySettings("proxy.example").port == 80)
        #expect(try ProxySettings("socks5://[::1]").port == 1080)
        #expect(try ProxySettings("socks5h://127.0.0.1:9050").kind == .socks5)
        for (bad, why) in [
            ("ftp://h:1", "unknown scheme 'ftp'"),
            ("https://h:1", "TLS to the proxy (https://) is not supported"),
            ("socks5://u:p@h:1", "SOCKS5 with a user name and password is not supported"),
            ("http://h:0", "bad port '0'"),
            ("http://h:1/path", "a proxy URL has no path"),
            ("http://", "missing host"),
        ] {
            #expect {
                try ProxySettings(bad)
            } throws: { error in
                "\(error)".contains(why) && !"\(error)".contains(":p@")
            }
        }
    }

    @Test("which variable applies to which scheme, lower case first")
    func variables() throws {
        let env = ProxyEnvironment([
            "http_proxy": "http://lower:1", "HTTP_PROXY": "http://upper:1",
            "HTTPS_PROXY": "http://secure:1", "ALL_PROXY": "socks5://all:1",
        ])
        #expect(try env.proxy(for: TransportURL("ws://a.example/"))?.host == "lower")
        #expect(try env.proxy(for: TransportURL("wss://a.example/"))?.host == "secure")
        #expect(try env.proxy(for: TransportURL("tcp://a.example:7"))?.host == "all")
        #expect(try env.proxy(for: TransportURL("tls://a.example:7"))?.host == "all")
        #expect(try ProxyEnvironment(["HTTP_PROXY": "http://p:1"]).proxy(for: TransportURL("tcp://a.example:7")) == nil)
        #expect(try ProxyEnvironment(["HTTPS_PROXY": ""]).proxy(for: TransportURL("wss://a.example/")) == nil)
        #expect {
            try ProxyEnvironment(["HTTPS_PROXY": "gopher://p:1"]).proxy(for: TransportURL("wss://a.example/"))
        } throws: { error in "\(error)".hasPrefix("HTTPS_PROXY: 'gopher://p:1' is not a proxy URL") }
    }

    @Test("NO_PROXY: names and their subdomains, IPs, IPv4 ranges, ports, *")
    func noProxy() {
        let env = ProxyEnvironment(["no_proxy": "internal.example, .corp.example,10.0.0.0/8 127.0.0.1,[::1],api.example:8443"])
        #expect(env.bypasses(host: "internal.example", port: 80))
        #expect(env.bypasses(host: "a.internal.example", port: 80))
        #expect(!env.bypasses(host: "notinternal.example", port: 80))
        #expect(env.bypasses(host: "x.corp.example", port: 80))
        #expect(env.bypasses(host: "corp.example", port: 80))
        #expect(env.bypasses(host: "10.2.3.4", port: 80))
        #expect(!env.bypasses(host: "11.2.3.4", port: 80))
        #expect(env.bypasses(host: "127.0.0.1", port: 9))
        #expect(!env.bypasses(host: "localhost", port: 9))
        #expect(env.bypasses(host: "::1", port: 9))
        #expect(env.bypasses(host: "API.example", port: 8443))
        #expect(!env.bypasses(host: "api.example", port: 443))
        #expect(ProxyEnvironment(["NO_PROXY": "*"]).bypasses(host: "anything", port: 1))
        #expect(!ProxyEnvironment([:]).bypasses(host: "anything", port: 1))
    }
}
