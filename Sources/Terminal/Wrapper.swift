/// Breaks streamed text into rows of at most `width` columns, by display width, between
/// words where it can: at spaces, and around wide (CJK) characters, which need no space
/// to break. A word longer than a row is cut where the row ends. Text arrives in pieces;
/// a word not yet ended is held back until its end is known (`flush` gives it up).
public struct Wrapper {
    public var width: Int
    /// Columns used on the current row.
    public private(set) var column = 0
    private var word = ""
    private var wordWidth = 0
    /// Spaces seen after the last word, not yet written (none at a row's start).
    private var spaces = 0

    public init(width: Int, column: Int = 0) {
        self.width = max(1, width)
        self.column = column
    }

    /// The text to print for `piece`, with newlines where rows end.
    public mutating func feed(_ piece: String) -> String {
        var out = ""
        for character in piece {
            switch character {
            case "\n", "\r\n":
                out += takeWord() + "\n"
                column = 0
                spaces = 0
            case " ":
                out += takeWord()
                spaces += 1
            default:
                let characterWidth = DisplayWidth.of(character)
                if characterWidth == 2 {
                    // A wide character is a word of its own.
                    out += takeWord()
                    word = String(character)
                    wordWidth = 2
                    out += takeWord()
                } else {
                    word.append(character)
                    wordWidth += characterWidth
                }
            }
        }
        return out
    }

    /// Whatever is held back, at the end of the text.
    public mutating func flush() -> String {
        takeWord()
    }

    /// Places the word held: after the spaces before it when it fits, else on a new row.
    private mutating func takeWord() -> String {
        guard !word.isEmpty else { return "" }
        defer { word = ""; wordWidth = 0; spaces = 0 }
        var out = ""
        if column > 0 && column + spaces + wordWidth > width {
            out += "\n"
            column = 0
        } else if column > 0 || spaces > 0 {
            let gap = min(spaces, width - column)
            out += String(repeating: " ", count: gap)
            column += gap
        }
        // Too long for any row: cut it where rows end.
        for character in word {
            let characterWidth = DisplayWidth.of(character)
            if column + characterWidth > width {
                out += "\n"
                column = 0
            }
            out.append(character)
            column += characterWidth
        }
        return out
    }
}
