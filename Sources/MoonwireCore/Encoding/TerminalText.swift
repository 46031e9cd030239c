/// Text from a peer made safe to print: control characters (escape sequences could move
/// the cursor or change colours) are written as `\u{1b}` escapes; tab and newline stay.
///
/// ```swift
/// TerminalText.printable("a\u{1b}[2Jb")   // "a\\u{1b}[2Jb"
/// ```
public enum TerminalText {
    public static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x09, 0x0a: out.unicodeScalars.append(scalar)
            case 0..<0x20, 0x7f, 0x80..<0xa0: out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
