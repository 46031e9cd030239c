import Testing

@Suite(.timeLimit(.minutes(5))) struct CommandLineTests {
    @Test func version() throws {
        let r = try CommandRunner.run("--version")
        #expect(r.status == 0)
        #expect(r.stdout == "0.1.0\n")
    }

    @Test(arguments: [
        (["run"], "Missing expected argument '<script>'"),
        (["frobnicate"], "Unexpected argument 'frobnicate'"),
        (["run", "no/such/script.lua"], "cannot read 'no/such/script.lua': No such file or directory"),
        (["run", "--log-format", "xml", "x.lua"], "--log-format"),
        (["check"], "Missing expected argument '<scripts> ...'"),
    ])
    func usageErrorsAreOneLineAndExitTwo(arguments: [String], mentions: String) throws {
        let r = try CommandRunner.run(arguments)
        #expect(r.status == 2)
        #expect(r.stderr.hasPrefix("moonwire: "))
        #expect(r.stderr.contains(mentions))
        #expect(r.stderr.hasSuffix("(see 'moonwire --help')\n"))
        #expect(r.stderr.filter { $0 == "\n" }.count == 1)
    }

    @Test func checkReportsEveryFilesErrors() throws {
        let good = try CommandRunner.script("good.lua", "print('fine')\n")
        let bad1 = try CommandRunner.script("bad1.lua", "local = 1\n")
        let bad2 = try CommandRunner.script("bad2.lua", "\n\nfunction f(\n")
        let r = try CommandRunner.run("check", bad1, good, bad2)
        #expect(r.status == 1)
        #expect(r.stdout == "")
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        #expect(lines.first?.hasPrefix("\(bad1):1: ") == true)
        #expect(lines.last?.hasPrefix("\(bad2):4: ") == true)
        #expect(try CommandRunner.run("check", good, "examples/hello.lua").status == 0)
    }
}
