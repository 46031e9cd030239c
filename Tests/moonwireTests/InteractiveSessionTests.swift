import Foundation
import Testing

/// `moonwire connect` and `moonwire listen` through a pseudo-terminal and through pipes,
/// against real servers: each case is a function of Interactive/cli_sessions.py (pexpect and
/// Python websockets, from the venv of Tests/MoonwireCoreTests/Peers/setup_venv.sh).
/// One at a time: every case starts several processes.
@Suite(.serialized, .timeLimit(.minutes(5))) struct InteractiveSessionTests {
    /// Sessions that talk to each other take a few seconds; this is only the bound.
    static let deadline: TimeInterval = 120

    @Test(arguments: [
        "tty_session", "tty_close_no_color", "tty_second_interrupt", "pipe_session", "exit_codes",
        "tcp_line", "listen_relay", "listen_pipes", "listen_script",
        "tty_reconnect", "tls", "tty_listen_end_of_input", "tty_protocol_mqtt",
        "formats_connect", "formats_listen", "formats_replay",
    ])
    func session(_ name: String) throws {
        let python = try EchoPeer.python()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [
            CommandRunner.packageRoot.appendingPathComponent("Tests/moonwireTests/Interactive/cli_sessions.py").path,
            CommandRunner.executable.path, name,
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let timer = DispatchSource.makeTimerSource()
        timer.schedule(deadline: .now() + Self.deadline)
        timer.setEventHandler { kill(process.processIdentifier, SIGKILL) }
        timer.resume()
        let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        timer.cancel()
        #expect(process.terminationStatus == 0, "\(name):\n\(output.suffix(6000))")
    }
}
