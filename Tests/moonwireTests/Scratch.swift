import Foundation

/// Where this module's tests write files: `$TMPDIR/moonwire-tests-PID`, removed when the
/// test process exits, so that a run leaves nothing behind in the temporary directory.
/// (A run its watchdog kills keeps it, for a look at what the hung test wrote.)
enum Scratch {
    static let root: URL = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("moonwire-tests-\(getpid())")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: Scratch.root) }
        return dir
    }()

    /// The folder `name` under the root, created if missing; `fresh` empties it first.
    static func folder(_ name: String, fresh: Bool = false) throws -> URL {
        let dir = root.appendingPathComponent(name)
        if fresh { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }
}
