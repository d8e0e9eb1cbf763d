import CTerminal

/// How many terminal columns text takes, by character (grapheme cluster): a cluster is as
/// wide as its first code point (`wcwidth`: 2 for CJK and most emoji, 0 for a combining
/// mark on its own), and what follows in the cluster (combining marks, skin tones, joined
/// emoji) adds nothing, as terminals draw it; U+FE0F asks for the wide emoji form.
public enum DisplayWidth {
    /// Makes `wcwidth` answer for UTF-8: the user's locale when it is UTF-8, else C.UTF-8.
    /// Called once at start by every program that measures text.
    @discardableResult
    public static func useUTF8Locale() -> Bool { utf8Locale }

    /// Set up once, before the first measurement.
    private static let utf8Locale = confab_use_utf8_locale() != 0

    public static func of(_ character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let first = scalars.first else { return 0 }
        if first.value < 0x7F { return first.value >= 0x20 ? 1 : 0 }
        _ = utf8Locale
        var width = max(0, Int(confab_wcwidth(first.value)))
        if width == 1, scalars.contains(where: { $0.value == 0xFE0F }) { width = 2 }
        return width
    }

    public static func of(_ text: String) -> Int {
        // Printable ASCII is one column a byte, and most of what is measured is that;
        // splitting it into characters costs far more than the sum.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return text.utf8.count }
        return sum(text)
    }

    public static func of(_ text: some StringProtocol) -> Int { sum(text) }

    private static func sum(_ text: some StringProtocol) -> Int {
        var total = 0
        for character in text { total += of(character) }
        return total
    }

    /// The longest start of `text` that fits in `columns`, with `…` at its end when it had
    /// to be cut.
    public static func truncate(_ text: String, to columns: Int) -> String {
        guard columns > 0 else { return "" }
        if of(text) <= columns { return text }
        var result = ""
        var used = 0
        for character in text {
            let width = of(character)
            if used + width > columns - 1 { break }
            result.append(character)
            used += width
        }
        return result + "…"
    }

    /// `text` padded with spaces to `columns` (never cut).
    public static func pad(_ text: String, to columns: Int) -> String {
        text + String(repeating: " ", count: max(0, columns - of(text)))
    }
}

/// The terminal `fd` is, if it is one: its size.
public enum TerminalSize {
    public static func of(_ fd: Int32) -> (columns: Int, rows: Int)? {
        var columns: Int32 = 0, rows: Int32 = 0
        guard confab_terminal_size(fd, &columns, &rows) != 0 else { return nil }
        return (Int(columns), Int(rows))
    }
}
