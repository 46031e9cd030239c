/// A part of a JSON message a replay leaves out (`--ignore`), as docs/recording.md
/// describes it:
///
/// - `id`: a field of that name at any depth.
/// - `user.id`: a path of field names from the top; arrays on the way are passed
///   over (`users.id` names the `id` of every element of `users`).
/// - `[1]`, `$[1]`, `$.a[0].id`, `a[*].id`: a path from the top that names array
///   positions (from 0, as the differences show them; `[*]` is any position); every
///   array on the way is named.
/// - `*[1]`, `*.user.id`: that path ending at any depth (`*[1]`: position 1 of every array).
///
/// ```swift
/// let path = try IgnorePath("*[1]")
/// path.matches([.index(1)])                       // true: OCPP's message id
/// path.matches([.key("calls"), .index(0), .index(1)])  // true
/// ```
public struct IgnorePath: Sendable, Equatable {
    /// One step into a JSON value.
    public enum Step: Sendable, Hashable {
        case key(String)
        case index(Int)
    }

    enum Pattern: Sendable, Equatable {
        case key(String)
        case index(Int)
        case anyIndex

        func matches(_ step: Step) -> Bool {
            switch (self, step) {
            case (.key(let a), .key(let b)): a == b
            case (.index(let a), .index(let b)): a == b
            case (.anyIndex, .index): true
            default: false
            }
        }
    }

    /// Why a path cannot be read.
    public struct SyntaxError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    let steps: [Pattern]
    /// Matches a path's end at any depth (`*...`, a bare name).
    let anyDepth: Bool
    /// Names positions: arrays on the way count as steps.
    let positional: Bool

    public init(_ text: String) throws(SyntaxError) {
        func bad(_ why: String) -> SyntaxError {
            SyntaxError(description: "--ignore '\(text)': \(why) (a field name such as id, a path such as user.id, $.a[0].id or [1], or *[1] at any depth)")
        }
        var rest = Substring(text)
        var anyDepth = false
        if rest.hasPrefix("*") {
            anyDepth = true
            rest = rest.dropFirst()
        } else if rest.hasPrefix("$") {
            rest = rest.dropFirst()
        } else if !rest.contains(".") && !rest.contains("[") {
            anyDepth = true
        }
        var steps: [Pattern] = []
        var first = true
        while !rest.isEmpty {
            if rest.hasPrefix("[") {
                guard let close = rest.firstIndex(of: "]") else { throw bad("a '[' without its ']'") }
                let inside = rest[rest.index(after: rest.startIndex)..<close]
                if inside == "*" {
                    steps.append(.anyIndex)
                } else if let n = Int(inside), n >= 0, inside.allSatisfy(\.isASCII) {
                    steps.append(.index(n))
                } else {
                    throw bad("'[\(inside)]' is not a position: a number from 0, or *")
                }
                rest = rest[rest.index(after: close)...]
            } else {
                if rest.hasPrefix(".") {
                    rest = rest.dropFirst()
                } else if !first {
                    throw bad("a '.' or '[' expected before '\(rest)'")
                }
                let end = rest.firstIndex { $0 == "." || $0 == "[" } ?? rest.endIndex
                let name = rest[..<end]
                guard !name.isEmpty else { throw bad("a field name is empty") }
                steps.append(.key(String(name)))
                rest = rest[end...]
            }
            first = false
        }
        guard !steps.isEmpty else { throw bad("nothing named") }
        self.steps = steps
        self.anyDepth = anyDepth
        self.positional = steps.contains { if case .key = $0 { false } else { true } }
    }

    /// Does this path name the value at `path` (field names and array positions from the top)?
    public func matches(_ path: [Step]) -> Bool {
        if anyDepth {
            return path.count >= steps.count && zip(path.suffix(steps.count), steps).allSatisfy { $1.matches($0) }
        }
        let subject = positional ? path : path.filter { if case .key = $0 { true } else { false } }
        return subject.count == steps.count && zip(subject, steps).allSatisfy { $1.matches($0) }
    }
}
