/// A line typed (or piped) into `connect` or `listen`: a message, or a slash command.
/// A line that starts with `//` is a message starting with `/`.
///
/// ```swift
/// SessionInput("/close 4000 bye")   // .command("close", "4000 bye")
/// SessionInput("//etc")             // .message("/etc")
/// ```
enum SessionInput: Equatable {
    case message(String)
    case command(String, String)

    init(_ line: String) {
        if line.hasPrefix("//") {
            self = .message(String(line.dropFirst()))
        } else if line.hasPrefix("/") {
            let body = line.dropFirst()
            let name = body.prefix { $0 != " " }
            self = .command(name.lowercased(), String(body.dropFirst(name.count).drop { $0 == " " }))
        } else {
            self = .message(line)
        }
    }

    /// `4000 bye` as a close code and a reason; nil when the code is not a number.
    static func closeArguments(_ argument: String) -> (code: UInt16, reason: String)? {
        let words = argument.split(separator: " ", maxSplits: 1)
        guard let first = words.first else { return (1000, "") }
        guard let code = UInt16(first) else { return nil }
        return (code, words.count > 1 ? String(words[1]) : "")
    }
}
