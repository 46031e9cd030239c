import ArgumentParser
import Foundation
import MoonwireLua

/// Finds test files: the paths given (files as they are, folders searched
/// recursively), else tests/, else spec/.
enum TestDiscovery {
    static func isTestFile(_ name: String) -> Bool {
        name.hasSuffix("_test.lua") || name.hasSuffix("_spec.lua") || (name.hasPrefix("test_") && name.hasSuffix(".lua"))
    }

    /// `patterns`: Lua patterns on a file's name (busted's `--pattern`) that
    /// pick `.lua` files in folders instead of the usual names.
    static func files(in paths: [String], patterns: [String] = []) throws -> [String] {
        let fm = FileManager.default
        var roots = paths
        if roots.isEmpty {
            guard let found = ["tests", "spec"].first(where: { fm.fileExists(atPath: $0) }) else {
                throw ValidationError("no tests/ or spec/ folder here; name the test files or folders to run")
            }
            roots = [found]
        }
        var files: [String] = []
        for root in roots {
            var isDirectory: ObjCBool = false
            guard fm.fileExists(atPath: root, isDirectory: &isDirectory) else {
                throw ValidationError("cannot read '\(root)': No such file or directory; name test files or folders")
            }
            guard isDirectory.boolValue else {
                files.append(root)
                continue
            }
            let found = try (fm.enumerator(atPath: root)?.allObjects as? [String] ?? [])
                .filter { path in
                    let name = (path as NSString).lastPathComponent
                    if patterns.isEmpty { return isTestFile(name) }
                    guard name.hasSuffix(".lua") else { return false }
                    do { return try BustedConfig.matches(name, patterns: patterns) } catch { throw ValidationError("\(error)") }
                }
                .sorted()
                .map { (root as NSString).appendingPathComponent($0) }
            files.append(contentsOf: found)
        }
        guard !files.isEmpty else {
            throw ValidationError("no test files (*_test.lua, *_spec.lua, test_*.lua) in \(roots.joined(separator: ", "))")
        }
        return files
    }
}
