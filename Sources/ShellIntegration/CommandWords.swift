/// The words of a slash command's arguments, quoted as a shell quotes them, so that a path
/// with spaces can be given: `/attach 'my notes.txt' shot\ 1.png "a \"b\".md"`.
///
/// Outside quotes, blanks separate words and a backslash keeps the next character as it is;
/// inside single quotes everything is kept; inside double quotes everything is kept but
/// `\"` and `\\`, which keep the quote or the backslash. Nothing else is expanded.
public enum CommandWords {
    /// The words, or nil when a quote is left open.
    public static func split(_ text: String) -> [String]? {
        let scan = scan(text)
        return scan.openQuote == nil ? scan.words : nil
    }

    /// The last word as far as it is typed (an empty one after a blank), and where it starts
    /// in `text`: what Tab completes, and what its completion replaces.
    public static func lastWord(_ text: String) -> (start: String.Index, word: String) {
        let scan = scan(text)
        guard let start = scan.lastStart else { return (text.endIndex, "") }
        return (start, scan.words.last ?? "")
    }

    /// `word` written so that `split` reads it back as one word: blanks, quotes and
    /// backslashes get a backslash.
    public static func escaped(_ word: String) -> String {
        var out = ""
        for character in word {
            if character == " " || character == "\t" || character == "'" || character == "\"" || character == "\\" { out.append("\\") }
            out.append(character)
        }
        return out
    }

    private struct Scan {
        var words: [String] = []
        /// Where the word being read (the last of `words`) starts; nil after a blank.
        var lastStart: String.Index?
        var openQuote: Character?
    }

    private static func scan(_ text: String) -> Scan {
        var scan = Scan()
        var inWord = false
        var escaping = false
        var index = text.startIndex
        func begin(at position: String.Index) {
            if !inWord {
                scan.words.append("")
                scan.lastStart = position
                inWord = true
            }
        }
        while index < text.endIndex {
            let character = text[index]
            if escaping {
                scan.words[scan.words.count - 1].append(character)
                escaping = false
            } else if let quote = scan.openQuote {
                if character == quote {
                    scan.openQuote = nil
                } else if quote == "\"", character == "\\", let next = text.index(index, offsetBy: 1, limitedBy: text.endIndex),
                          next < text.endIndex, text[next] == "\"" || text[next] == "\\" {
                    scan.words[scan.words.count - 1].append(text[next])
                    index = next
                } else {
                    scan.words[scan.words.count - 1].append(character)
                }
            } else if character == " " || character == "\t" {
                inWord = false
                scan.lastStart = nil
            } else {
                begin(at: index)
                if character == "\\" {
                    escaping = true
                } else if character == "'" || character == "\"" {
                    scan.openQuote = character
                } else {
                    scan.words[scan.words.count - 1].append(character)
                }
            }
            index = text.index(after: index)
        }
        // A backslash that ends the line keeps itself.
        if escaping { scan.words[scan.words.count - 1].append("\\") }
        return scan
    }
}
