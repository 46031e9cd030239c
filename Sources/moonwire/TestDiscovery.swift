import ArgumentParser
import Foundation
import MoonwireLua

/// Finds test files: the paths given (files as they are, folders searched
/// recursively for moonwire's names or the `patterns`); with none, busted's
/// way: `.busted`'s ROOT, else spec/, searched by busted's pattern `_spec`
/// unless a pattern is given. A project with tests/ and no spec/ (and no ROOT)
/// gets tests/ with moonwire's names: busted would find nothing there.
enum TestDiscovery {
    static func isTestFile(_ name: String) -> Bool {
        name.hasSuffix("_test.lua") || name.hasSuffix("_spec.lua") || (name.hasPrefix("test_") && name.hasSuffix(".lua"))
    }

    /// busted's defaults: the folder and the pattern on file names it runs with no path.
    static let bustedRoot = "spec"
    static let bustedPattern = "_spec"

    /// `paths`: from the command line; `root`: `.busted`'s ROOT; `patterns`: Lua
    /// patterns on a file's name (busted's `--pattern`) that pick `.lua` files in
    /// folders instead of the usual names.
    static func files(in paths: [String], root: [String] = [], patterns: [String] = []) throws -> [String] {
        let fm = FileManager.default
        var roots = paths
        var patterns = patterns
        if roots.isEmpty {
            if !root.isEmpty || fm.fileExists(atPath: bustedRoot) {
                roots = root.isEmpty ? [bustedRoot] : root
                if patterns.isEmpty { patterns = [bustedPattern] }
            } else if fm.fileExists(atPath: "tests") {
                roots = ["tests"]
            } else {
                throw ValidationError("no spec/ (or tests/) folder here; name the test files or folders to run")
            }
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
            let names = patterns.isEmpty ? "*_test.lua, *_spec.lua, test_*.lua" : "*.lua matching " + patterns.joined(separator: " or ")
            throw ValidationError("no test files (\(names)) in \(roots.joined(separator: ", "))")
        }
        return files
    }
}
