import CLibEdit
import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The terminal (or pipe) side of `connect` and `listen`: input lines come in on a
/// thread of their own, output lines go out from any thread.
///
/// At a terminal (stdin and stdout both TTYs) input goes through libedit's line editor
/// (editing keys, history in `~/.moonwire_history`), and every output line is written by
/// the editor's thread: it clears the prompt line, writes, and redraws the prompt with
/// what was typed so far, so messages arriving while the user types never tear the line.
/// Otherwise stdin is read line by line and output is written as it comes.
///
/// In `.asking` mode (`moonwire lua`) a line is read only when asked for with `ask`,
/// with the prompt given there, and what was typed stays on the screen, as in an
/// interpreter; without a terminal the prompt is written to stdout, as `lua` does.
///
/// ```swift
/// let console = Console(interactive: true, prompt: "> ", colors: true)
/// console.start(on: loop, onLine: { line in handle(line) }, onEnd: { inputEnded() })
/// console.write("< hello\n")
/// console.finish()   // before exit: restores the terminal and saves the history
/// ```
final class Console: @unchecked Sendable {
    enum Stream { case out, err }

    /// `.session`: a line editor always waiting for input, entered lines taken off the
    /// screen (connect, listen). `.asking`: one line per `ask`, left on the screen.
    enum Mode { case session, asking }

    /// True when the line editor runs.
    let interactive: Bool
    private let mode: Mode
    private let colors: Bool
    private var prompt: String
    private var promptWidth: Int
    /// Set by `ask`, taken by the editor's thread (or the pipe reader).
    private var asked: String?
    private let askedForLine = DispatchSemaphore(value: 0)
    /// Guards `pending` and `stopping`; writers wait on it while `pending` is full.
    private let lock = NSCondition()
    private var pending: [(Stream, [UInt8])] = []
    /// Lines waiting for the editor's thread. A writer beyond this waits, which holds up
    /// the event loop and so the reading of sockets: a flood slows down instead of piling up.
    private static let pendingLimit = 1_000
    private var stopping = false
    private var stopped = DispatchSemaphore(value: 0)
    private var wakeRead: Int32 = -1
    private var wakeWrite: Int32 = -1
    private var savedTerminal = termios()
    private var onLine: (String) -> Void = { _ in }
    private var onEnd: () -> Void = {}
    /// Lines libedit handed over during one `rl_callback_read_char`; nil for end of input.
    private var entered: [String?] = []
    private var editing = false
    private static let historyLimit: Int32 = 1000
    /// libedit's line callback is a C function without context: it reaches the one console here.
    nonisolated(unsafe) static var active: Console?

    /// Whether stdin and stdout are both terminals.
    static var isTerminal: Bool { isatty(0) == 1 && isatty(1) == 1 }

    /// `prompt` is shown at a terminal; with `colors` it is drawn bold.
    init(interactive: Bool, prompt: String, colors: Bool, mode: Mode = .session) {
        self.interactive = interactive
        self.mode = mode
        self.colors = colors
        self.promptWidth = prompt.count
        self.prompt = Self.drawn(prompt, colors: colors)
        if interactive {
            var fds: [Int32] = [0, 0]
            pipe(&fds)
            (wakeRead, wakeWrite) = (fds[0], fds[1])
            _ = fcntl(wakeRead, F_SETFL, fcntl(wakeRead, F_GETFL) | O_NONBLOCK)
        }
    }

    /// libedit takes \u{1} ... \u{1} around bytes that take no room on the screen.
    private static func drawn(_ prompt: String, colors: Bool) -> String {
        colors ? "\u{1}\u{1b}[1m\u{1}\(prompt)\u{1}\u{1b}[0m\u{1}" : prompt
    }

    /// `.asking` mode: shows `prompt` and reads one line (handed to `onLine`, or the end
    /// of input to `onEnd`). From any thread.
    func ask(_ prompt: String) {
        guard interactive else {
            write(Array(prompt.utf8))
            askedForLine.signal()
            return
        }
        let first = lock.withLock {
            asked = prompt
            return pending.isEmpty
        }
        if first { wake() }
    }

    /// Lines read but not yet handled: the reader waits beyond this, so a fast pipe
    /// cannot pile up work on the loop.
    static let linesInFlight = 1_000

    /// Starts reading stdin: each line goes to `onLine`, the end of input to `onEnd`,
    /// both on `loop`.
    func start(on loop: EventLoop, onLine: @escaping (String) -> Void, onEnd: @escaping () -> Void) {
        let inFlight = DispatchSemaphore(value: Console.linesInFlight)
        // The editor's thread must never wait for the loop: the loop may be waiting for
        // it to take output. What a person types or pastes is bounded anyway.
        let bounded = !interactive
        start(
            onLine: { line in
                if bounded { inFlight.wait() }
                loop.execute {
                    onLine(line)
                    if bounded { inFlight.signal() }
                }
            },
            onEnd: { loop.execute(onEnd) }
        )
    }

    /// Starts reading stdin: each line goes to `onLine`, the end of input to `onEnd`,
    /// both on the console's thread.
    private func start(onLine: @escaping (String) -> Void, onEnd: @escaping () -> Void) {
        self.onLine = onLine
        self.onEnd = onEnd
        if interactive {
            tcgetattr(0, &savedTerminal)
            Console.active = self
            Thread.detachNewThread { self.editLoop() }
        } else {
            let asking = mode == .asking
            Thread.detachNewThread { [askedForLine] in
                while true {
                    if asking { askedForLine.wait() }
                    guard let line = readLine(strippingNewline: true) else { break }
                    onLine(line)
                }
                onEnd()
            }
        }
    }

    /// Writes `text` (whole lines, each ending with a newline) to stdout or stderr.
    func write(_ text: String, to stream: Stream = .out) {
        write(Array(text.utf8), to: stream)
    }

    /// Writes `bytes` (whole lines, each ending with a newline) to stdout or stderr.
    func write(_ bytes: [UInt8], to stream: Stream = .out) {
        guard interactive else {
            lock.withLock { Console.writeAll(stream == .out ? 1 : 2, bytes) }
            return
        }
        let first = lock.withLock {
            while pending.count >= Console.pendingLimit && !stopping { lock.wait() }
            pending.append((stream, bytes))
            return pending.count == 1
        }
        if first { wake() }
    }

    /// Stops the editor, writes what is still pending, restores the terminal and saves
    /// the history. Waits at most a second for the editor's thread.
    func finish() {
        guard interactive else { return }
        lock.withLock {
            stopping = true
            lock.broadcast()
        }
        wake()
        _ = stopped.wait(timeout: .now() + 1)
    }

    /// For an exit that cannot wait (a second Ctrl-C): puts the terminal back as it was.
    func restoreTerminalNow() {
        guard interactive else { return }
        tcsetattr(0, TCSANOW, &savedTerminal)
        Console.writeAll(1, Array("\n".utf8))
    }

    // MARK: The editor's thread

    private func wake() {
        var byte: UInt8 = 1
        _ = Glibc.write(wakeWrite, &byte, 1)
    }

    private func editLoop() {
        rl_catch_signals = 0
        rl_initialize()
        using_history()
        stifle_history(Console.historyLimit)
        let history = historyFile
        if let history { read_history(history) }
        if mode == .session {
            rl_callback_handler_install(prompt, Console.lineHandler)
            editing = true
        }
        var fds = [pollfd(fd: 0, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        while true {
            fds[0].fd = editing ? 0 : -1
            if poll(&fds, 2, -1) < 0 && errno != EINTR { break }
            if fds[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 256)
                while read(wakeRead, &drain, drain.count) > 0 {}
            }
            if editing && fds[0].revents != 0 {
                rl_callback_read_char()
                takeEnteredLines()
            }
            let (lines, stop, ask) = lock.withLock { () -> ([(Stream, [UInt8])], Bool, String?) in
                defer {
                    pending.removeAll()
                    asked = nil
                    lock.broadcast()
                }
                return (pending, stopping, asked)
            }
            flush(lines)
            if stop { break }
            if let ask {
                fflush(stdout)
                promptWidth = ask.count
                prompt = Self.drawn(ask, colors: colors)
                rl_callback_handler_install(prompt, Console.lineHandler)
                editing = true
            }
        }
        if editing {
            // The prompt and a half-typed line go: the session is over.
            rl_callback_handler_remove()
            Console.writeAll(1, Array("\r\u{1b}[K".utf8))
        }
        tcsetattr(0, TCSANOW, &savedTerminal)
        if let history { write_history(history) }
        stopped.signal()
    }

    /// Hands the lines just entered on. What the user typed is taken off the screen: the
    /// session prints it back marked and coloured once it is sent.
    private func takeEnteredLines() {
        let lines = entered
        entered.removeAll()
        for line in lines {
            guard let line else {
                rl_callback_handler_remove()
                editing = false
                Console.writeAll(1, Array("\r\u{1b}[K".utf8))
                onEnd()
                return
            }
            if !line.isEmpty { add_history(line) }
            if mode == .asking {
                // As in an interpreter the line stays; the next prompt comes with the next ask.
                rl_callback_handler_remove()
                editing = false
                onLine(line)
                continue
            }
            let rows = (promptWidth + line.count) / Console.columns + 1
            Console.writeAll(1, Array("\r\u{1b}[K\u{1b}[\(rows)A\r\u{1b}[J".utf8))
            // libedit keeps the entered line in its buffer until the next key: a fresh
            // handler starts from an empty one.
            rl_callback_handler_remove()
            rl_callback_handler_install(prompt, Console.lineHandler)
            onLine(line)
        }
    }

    private func flush(_ lines: [(Stream, [UInt8])]) {
        guard !lines.isEmpty else { return }
        fflush(stdout)
        if editing { Console.writeAll(1, Array("\r\u{1b}[K".utf8)) }
        for (stream, bytes) in lines { Console.writeAll(stream == .out ? 1 : 2, bytes) }
        if editing { rl_forced_update_display() }
    }

    private static let lineHandler: @convention(c) (UnsafeMutablePointer<CChar>?) -> Void = { line in
        Console.active?.entered.append(line.map { String(cString: $0) })
        free(line)
    }

    private static var columns: Int {
        var size = winsize()
        guard ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    /// `$MOONWIRE_HISTORY`, else `~/.moonwire_history` (`~/.moonwire_lua_history` for
    /// `moonwire lua`); none when HOME is unset.
    private var historyFile: String? {
        let env = ProcessInfo.processInfo.environment
        if let path = env["MOONWIRE_HISTORY"] { return path.isEmpty ? nil : path }
        return env["HOME"].map { $0 + (mode == .asking ? "/.moonwire_lua_history" : "/.moonwire_history") }
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }
}
