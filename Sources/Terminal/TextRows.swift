/// A line of ours (a notice, a help entry, a tool call, a question) laid out in rows of at
/// most `width` columns, broken between words: at spaces, which the break takes, and after
/// a comma that no digit follows, which stays (compacted JSON has no spaces between its
/// members). A word wider
/// than a row is cut where the row ends. Rows after the first start with `indent` spaces,
/// so a line that goes on is told from a new one. Newlines in the text start new rows.
public enum TextRows {
    public static func wrap(_ text: String, width: Int, indent: Int = 0) -> [String] {
        let width = max(1, width)
        // Half the row at most goes to the indent, so that any width still shows text.
        let indent = max(0, min(indent, width / 2))
        var rows: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            rows += wrapLine(line, width: width, indent: indent)
        }
        return rows
    }

    /// `wrap`'s rows joined by newlines.
    public static func wrapped(_ text: String, width: Int, indent: Int = 0) -> String {
        wrap(text, width: width, indent: indent).joined(separator: "\n")
    }

    /// `wrapped`, with `closing` (a notice's ` --`) kept on the row of the last word: when it
    /// does not fit there, the last word goes to a row of its own with it.
    public static func wrapped(_ text: String, closing: String, width: Int, indent: Int = 0) -> String {
        var rows = wrap(text, width: width, indent: indent)
        guard let last = rows.last else { return closing }
        let width = max(1, width)
        if DisplayWidth.of(last) + DisplayWidth.of(closing) <= width {
            rows[rows.count - 1] = last + closing
        } else {
            let margin = String(repeating: " ", count: max(0, min(indent, width / 2)))
            let trimmed = last.drop { $0 == " " }
            if let space = last.lastIndex(of: " "), last[..<space].contains(where: { $0 != " " }) {
                let word = last[last.index(after: space)...]
                rows[rows.count - 1] = String(last[..<space])
                rows += wrap(margin + word + closing, width: width, indent: indent)
            } else if !trimmed.isEmpty {
                rows += wrap(margin + closing.drop { $0 == " " }, width: width, indent: indent)
            }
        }
        return rows.joined(separator: "\n")
    }

    /// A line that must stay one row (a status redrawn in place): whole when it fits, else
    /// cut after its last word that fits, with `…`.
    public static func firstRow(_ text: String, width: Int) -> String {
        let width = max(1, width)
        if !text.contains("\n"), DisplayWidth.of(text) <= width { return text }
        let first = wrap(text, width: max(1, width - 1)).first ?? ""
        var kept = Substring(first)
        while kept.last == " " { kept.removeLast() }
        return kept + "…"
    }

    /// The column where a two-column line's second column starts: after its first run of two
    /// or more spaces that follows text (`/history [N]     show N…`); 0 when there is none.
    public static func secondColumn(of line: String) -> Int {
        var column = 0
        var spaces = 0
        var seenText = false
        for character in line {
            if character == " " {
                spaces += 1
            } else {
                if seenText && spaces >= 2 { return column }
                seenText = true
                spaces = 0
            }
            column += DisplayWidth.of(character)
        }
        return 0
    }

    private static func wrapLine(_ line: Substring, width: Int, indent: Int) -> [String] {
        var rows: [String] = []
        var row = ""
        var rowWidth = 0
        var rowHasText = false
        var pendingSpaces = 0
        let margin = String(repeating: " ", count: indent)

        func newRow() {
            rows.append(row)
            row = margin
            rowWidth = indent
            rowHasText = false
            pendingSpaces = 0
        }

        func place(_ word: String) {
            if rowHasText, rowWidth + pendingSpaces + DisplayWidth.of(word) > width {
                newRow()
            } else if pendingSpaces > 0 {
                let gap = min(pendingSpaces, width - rowWidth)
                row += String(repeating: " ", count: max(0, gap))
                rowWidth += max(0, gap)
            }
            pendingSpaces = 0
            for character in word {
                let characterWidth = DisplayWidth.of(character)
                if rowHasText, rowWidth + characterWidth > width { newRow() }
                row.append(character)
                rowWidth += characterWidth
                rowHasText = true
            }
        }

        var word = ""
        var afterComma = false
        for character in line {
            // A comma ends a word unless a digit follows it (`2,110` stays whole).
            if afterComma, character != " ", !character.isNumber {
                place(word)
                word = ""
            }
            afterComma = false
            if character == " " {
                if !word.isEmpty { place(word) }
                word = ""
                pendingSpaces += 1
            } else {
                word.append(character)
                afterComma = character == ","
            }
        }
        if !word.isEmpty { place(word) }
        rows.append(row)
        return rows
    }
}
